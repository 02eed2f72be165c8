"""Load a spec file: YAML -> overrides -> pydantic -> target and file checks.

Every problem found is turned into ``file:line:col: key.path: message`` with a
hint, and all of them are raised together as one SpecError.
"""

from __future__ import annotations

import glob
import os
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from pipeline import overrides, yaml_source
from pipeline.errors import Located, Problem, Problems, SpecError
from pipeline.spec import TARGETS, Spec
from pipeline.yaml_source import Document


@dataclass(frozen=True)
class LoadedSpec:
    """A valid spec and the file it came from (relative paths are relative to its folder)."""

    spec: Spec
    path: str

    @property
    def base_dir(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    def resolve(self, path: str) -> str:
        """A path from the spec, made absolute against the spec's folder (URIs are kept)."""
        if "://" in path or os.path.isabs(path):
            return path
        return os.path.normpath(os.path.join(self.base_dir, path))


def load_spec(path: str, sets: list[str] | tuple[str, ...] = (), target: str | None = None,
              check_files: bool = True) -> LoadedSpec:
    """Load and check a spec; raise SpecError with every problem found."""
    doc = yaml_source.load(path)
    if doc.data is None:
        raise SpecError([Located(path, 1, 1, "(top level)", "the spec is empty",
                                 "start from `tfxd init DIR --example taxi`")])
    if not isinstance(doc.data, dict):
        raise SpecError([Located(path, 1, 1, "(top level)", "the spec must be a mapping of keys",
                                 "start with `tfxd: 1` and `name: ...`")])
    overrides.apply(doc, list(sets))
    try:
        spec = Spec.model_validate(doc.data)
    except ValidationError as exc:
        raise SpecError(_locate_all(exc, doc)) from None
    loaded = LoadedSpec(spec, path)
    problems = Problems()
    if target is not None:
        _check_target(loaded, target, problems)
    if check_files:
        _check_files(loaded, problems)
    if problems.items:
        raise SpecError([doc.locate(p, of_key=not p.path or p.path[-1] == "targets") for p in problems.items])
    return loaded


def _check_target(loaded: LoadedSpec, target: str, problems: Problems) -> None:
    spec = loaded.spec
    if target not in TARGETS:
        problems.add(("targets",), f"unknown target {target!r}", f"targets are: {', '.join(TARGETS)}")
        return
    cluster = spec.targets.local.trainer if target == "local" else None
    if target != "local" and getattr(spec.targets, target) is None:
        needs = {"kubeflow": "image", "vertex": "project, region, image and root"}[target]
        problems.add(("targets",), f"the spec has no `targets.{target}` section",
                     f"add targets.{target} with {needs}")
        return
    if target == "vertex":
        cluster = spec.targets.vertex.trainer  # type: ignore[union-attr]
    if spec.training.strategy == "parameter_server" and cluster is not None and cluster.parameter_servers == 0:
        problems.add(("training", "strategy"),
                     f"parameter_server needs parameter servers, and targets.{target}.trainer has none",
                     f"set targets.{target}.trainer.parameter_servers to 1 or more, or use strategy auto")
    if target == "kubeflow":
        _check_kubeflow(spec, problems)
    from pipeline.placement import Placement

    Placement(loaded, target).problems(problems)


def _check_kubeflow(spec: Spec, problems: Problems) -> None:
    """What the Kubeflow target cannot honour, refused rather than dropped."""
    kubeflow = spec.targets.kubeflow
    assert kubeflow is not None
    if spec.training.strategy in ("multi_worker_mirrored", "parameter_server"):
        problems.add(("training", "strategy"), f"{spec.training.strategy} needs several Trainer processes, and "
                     "multi-worker training on Kubeflow (a TFJob through the Training Operator) is not built in "
                     "this version of tfxd", "use targets.vertex (trainer.workers / parameter_servers), or "
                     "strategy auto / mirrored (one pod, several GPUs)")
    if kubeflow.schedule and kubeflow.schedule.timezone != "UTC":
        problems.add(("targets", "kubeflow", "schedule", "timezone"), "Kubeflow recurring runs have no time zone: "
                     "their cron is read in the cluster's time (UTC)", "use timezone: UTC and write the cron in UTC")
    for component, resources in kubeflow.resources.items():
        if resources.memory and resources.memory.endswith("m"):
            problems.add(("targets", "kubeflow", "resources", component, "memory"),
                         f"memory {resources.memory!r} is in thousandths of a byte", "use Mi or Gi, e.g. 512Mi")


def _check_files(loaded: LoadedSpec, problems: Problems) -> None:
    spec = loaded.spec
    data = spec.data
    if data.path is not None and "://" not in data.path:
        base = loaded.resolve(data.path)
        if glob.has_magic(base):
            if not glob.glob(base):
                problems.add(("data", "path"), f"no file matches {data.path!r} (looked in {base})",
                             "check the glob; relative paths are relative to the spec file")
        elif not os.path.exists(base):
            problems.add(("data", "path"), f"{data.path!r} does not exist (looked for {base})",
                         "check the path; relative paths are relative to the spec file. "
                         "For the examples: tfxd init DIR --example NAME")
        elif os.path.isdir(base):
            for split, pattern in data.splits.items():
                if isinstance(pattern, str) and not glob.glob(os.path.join(base, pattern)):
                    problems.add(("data", "splits", split), f"no file under {data.path!r} matches {pattern!r}",
                                 "patterns are globs relative to data.path")
    if not problems.items:
        from pipeline import data_columns

        data_columns.check(loaded, problems)
    schema = spec.validation.schema_
    if schema != "infer" and "://" not in schema and not os.path.isfile(loaded.resolve(schema)):
        problems.add(("validation", "schema"), f"schema file {schema!r} does not exist",
                     "give the path of a schema.pbtxt, or `infer`")


# ------------------------------------------------ pydantic errors -> Located


def _locate_all(exc: ValidationError, doc: Document) -> list[Located]:
    by_path: dict[tuple, list[tuple[dict[str, Any], Problem]]] = {}
    for error in exc.errors(include_url=False):
        for problem in _problems(error, doc.data):
            by_path.setdefault(problem.path, []).append((error, problem))
    located = []
    for path, found in by_path.items():
        if _other_branch_went_deeper(path, found, by_path, _value_at(doc.data, path)):
            continue
        found = _prefer_matching_kind(found, _value_at(doc.data, path))
        problem = found[0][1]
        if len(found) > 1:
            messages = list(dict.fromkeys(p.message for _, p in found))
            hints = [p.hint for _, p in found if p.hint]
            problem = Problem(path, " or ".join(messages), hints[0] if hints else None)
        of_key = found[0][0]["type"] in ("extra_forbidden", "missing")
        located.append(doc.locate(problem, of_key=of_key))
    return located


_MAPPING_ERRORS = {"model_type", "dict_type", "model_attributes_type"}


def _prefer_matching_kind(found: list, value: Any) -> list:
    """Of a union's errors, keep those about the kind of value the user wrote."""
    if len(found) < 2:
        return found
    if isinstance(value, dict):
        kept = [item for item in found if item[0]["type"] not in _SCALAR_ERRORS]
    else:
        kept = [item for item in found if item[0]["type"] not in _MAPPING_ERRORS]
    return kept or found


def _other_branch_went_deeper(path: tuple, found: list, by_path: dict, value: Any) -> bool:
    """A mapping refused by a union's scalar branch (``optimizer: adam``) while its mapping branch
    reported the key inside that is wrong: only the key inside is the user's problem."""
    if not isinstance(value, dict) or any(item[0]["type"] not in _SCALAR_ERRORS for item in found):
        return False
    return any(len(other) > len(path) and other[:len(path)] == path for other in by_path)


_SCALAR_ERRORS = {"string_type", "int_type", "float_type", "bool_type", "literal_error", "list_type"}


def _problems(error: dict[str, Any], data: Any) -> list[Problem]:
    path = _data_path(error["loc"], data)
    kind = error["type"]
    if kind == "value_error" and isinstance(error.get("ctx", {}).get("error"), Problems):
        return [Problem(path + p.path, p.message, p.hint) for p in error["ctx"]["error"].items]
    if kind == "extra_forbidden":
        key = str(path[-1])
        allowed = _allowed_keys(path[:-1])
        close = closest(key, allowed)
        hint = f"did you mean {close!r}?" if close else f"allowed keys here: {', '.join(allowed)}"
        return [Problem(path, f"unknown key {key!r}", hint)]
    if kind == "missing":
        field = _field(path)
        what = f" ({field.description})" if field is not None and field.description else ""
        return [Problem(path, f"missing required key `{path[-1]}`{what}", f"add `{path[-1]}: ...`")]
    if kind == "literal_error":
        allowed = [a.strip("'") for a in error["ctx"]["expected"].replace(" or ", ", ").split(", ")]
        value = error["input"]
        close = closest(str(value), allowed) if isinstance(value, str) else None
        hint = (f"did you mean {close!r}? " if close else "") + f"allowed values: {', '.join(allowed)}"
        return [Problem(path, f"{value!r} is not allowed here", hint)]
    field = _field(path)
    if kind == "string_pattern_mismatch":  # the regex means nothing to a user; the hint says the form
        message = f"{_shown(error['input'])} does not have the form this key takes"
    else:
        message = error["msg"][0].lower() + error["msg"][1:]
        if not isinstance(error["input"], (dict, list)):
            message += f", got {_shown(error['input'])}"
    if kind in _RANGE_ERRORS or field is None or not field.description:
        hint = _KIND_HINTS.get(kind, "`tfxd schema` shows what every key takes")
    else:
        hint = f"{path[-1]}: {field.description}"
    return [Problem(path, message, hint)]


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 15]}... ({len(str(value))} characters)"


_RANGE_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")
# how to write a value pydantic refused, for keys without a description of their own
_KIND_HINTS = {
    "int_type": "write a whole number without quotes", "int_parsing": "write a whole number without quotes",
    "int_from_float": "write a whole number without quotes",
    "float_type": "write a number without quotes", "float_parsing": "write a number without quotes",
    "bool_type": "write true or false", "bool_parsing": "write true or false",
    "string_type": "write text (quote it if YAML would read it as a number, boolean or null)",
    "list_type": "write a list: `[a, b]` or one `- item` per line",
    "dict_type": "write a mapping: `key: value` lines indented under it",
    "model_type": "write a mapping: `key: value` lines indented under it",
    **{kind: "use a value inside that range" for kind in _RANGE_ERRORS},
}


def _data_path(loc: tuple, data: Any) -> tuple:
    """Map pydantic's error location to a path in the user's data (dropping union tags)."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if _holds(node, part):
            node = node[part]
            path.append(part)
        elif isinstance(node, dict) and isinstance(part, str) and _is_key_name(part):
            path.append(part)  # a missing or unknown key
            node = None
    return tuple(path)


def _holds(node: Any, part: Any) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _is_key_name(part: str) -> bool:
    # spec keys are snake_case; a capitalised part is a union's tag (a model's class name)
    return part.replace("_", "a").isalnum() and part[0].islower() and "[" not in part


def _value_at(data: Any, path: tuple) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _model_at(path: tuple) -> type[BaseModel] | None:
    """The spec model that holds the keys at ``path`` (None below dicts of free keys)."""
    annotation: Any = Spec
    for part in path:
        model = _unwrap_model(annotation)
        if isinstance(part, int):
            annotation = _item_type(annotation, list)
        elif model is not None:
            field = _find_field(model, part)
            if field is None:
                return None
            annotation = field.annotation
        else:
            annotation = _item_type(annotation, dict)
        if annotation is None:
            return None
    return _unwrap_model(annotation)


def _find_field(model: type[BaseModel], key: str):
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _field(path: tuple):
    if not path or not isinstance(path[-1], str):
        return None
    model = _model_at(path[:-1])
    return _find_field(model, path[-1]) if model else None


def _allowed_keys(path: tuple) -> list[str]:
    model = _model_at(path)
    if model is None:
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def _candidates(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _candidates(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [c for arg in typing.get_args(annotation) for c in _candidates(arg)]
    return [annotation]


def _unwrap_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in _candidates(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _item_type(annotation: Any, container: type) -> Any:
    for candidate in _candidates(annotation):
        if typing.get_origin(candidate) is container:
            return typing.get_args(candidate)[-1]
    return None


def closest(word: str, choices: list[str]) -> str | None:
    """The choice within a small edit distance of ``word``, if any."""
    best, best_distance = None, max(2, len(word) // 3) + 1
    for choice in choices:
        distance = _edit_distance(word.lower(), choice.lower())
        if distance < best_distance:
            best, best_distance = choice, distance
    return best


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]
