"""pydantic's validation errors -> problems located in the spec file: the key path the user wrote (union
branches and model names dropped), what is wrong, and a hint (the keys allowed there, the closest
name, the form a value takes)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.errors import Located, Path, Problem, Problems, closest
from tfxd.pipeline.spec.yaml_source import Document

Found = tuple[dict[str, Any], Problem]  # a pydantic error and the problem it makes


def locate_all(exc: ValidationError, doc: Document) -> list[Located]:
    by_path: dict[Path, list[Found]] = {}
    for details in exc.errors(include_url=False):
        error = dict(details)
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


def _prefer_matching_kind(found: list[Found], value: Any) -> list[Found]:
    """Of a union's errors, keep those about the kind of value the user wrote."""
    if len(found) < 2:
        return found
    if isinstance(value, dict):
        kept = [item for item in found if item[0]["type"] not in _SCALAR_ERRORS]
    else:
        kept = [item for item in found if item[0]["type"] not in _MAPPING_ERRORS]
    return kept or found


def _other_branch_went_deeper(path: Path, found: list[Found], by_path: dict[Path, list[Found]], value: Any) -> bool:
    """A mapping refused by a union's scalar branch (``optimizer: adam``) while its mapping branch
    reported the key inside that is wrong: only the key inside is the user's problem."""
    if not isinstance(value, dict) or any(item[0]["type"] not in _SCALAR_ERRORS for item in found):
        return False
    return any(len(other) > len(path) and other[:len(path)] == path for other in by_path)


_SCALAR_ERRORS = {"string_type", "int_type", "float_type", "bool_type", "literal_error", "enum", "list_type"}


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
    if kind in ("literal_error", "enum"):  # a Literal's choices, or an Enum's (pydantic words both alike)
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


def _data_path(loc: tuple[str | int, ...], data: Any) -> Path:
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


def _value_at(data: Any, path: Path) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _model_at(path: Path) -> type[BaseModel] | None:
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


def _find_field(model: type[BaseModel], key: str) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _field(path: Path) -> FieldInfo | None:
    if not path or not isinstance(path[-1], str):
        return None
    model = _model_at(path[:-1])
    return _find_field(model, path[-1]) if model else None


def _allowed_keys(path: Path) -> list[str]:
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
