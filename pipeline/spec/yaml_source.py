"""Read YAML safely, keeping where every key and value stands.

ruamel.yaml's round-trip loader records line and column of every node, which
lets each spec error point at the file position. No tag constructs an object:
tagged nodes are refused.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from tfxd.pipeline.spec.errors import Located, Path, Problem, SpecError, format_path


@dataclass(frozen=True)
class Position:
    source: str
    line: int  # 1-based
    col: int  # 1-based


@dataclass
class Document:
    """Plain data (dicts, lists, scalars) plus the position of every key and value."""

    source: str
    data: Any
    keys: dict[Path, Position] = field(default_factory=dict)
    values: dict[Path, Position] = field(default_factory=dict)

    def position(self, path: Path, of_key: bool = False) -> Position:
        """The position of ``path``, or of its nearest ancestor that has one."""
        table = self.keys if of_key else self.values
        for cut in range(len(path), -1, -1):
            prefix = path[:cut]
            found = table.get(prefix) or self.values.get(prefix) or self.keys.get(prefix)
            if found:
                return found
        return Position(self.source, 1, 1)

    def locate(self, problem: Problem, of_key: bool = False) -> Located:
        pos = self.position(problem.path, of_key)
        return Located(pos.source, pos.line, pos.col, format_path(problem.path), problem.message, problem.hint)


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _yaml(typ: str) -> YAML:
    yaml = YAML(typ=typ, pure=True)
    yaml.preserve_quotes = True
    return yaml


def read_scalar(text: str) -> Any:
    """Read ``text`` as a YAML value (``200`` -> 200, ``true`` -> True, ``[1, 2]`` -> list)."""
    if text.strip() == "":
        return text
    try:
        return _yaml("safe").load(text)
    except YAMLError:
        return text


def parse(text: str, source: str) -> Document:
    """Parse YAML text into a Document; YAML syntax errors raise SpecError."""
    try:
        root = _yaml("rt").load(io.StringIO(text))
    except DuplicateKeyError as exc:
        found = _duplicates(text, source)
        if not found:
            raise _syntax_error(exc, source, "a key appears twice in the same mapping",
                                "keep one of the two; YAML keys must be unique") from None
        raise SpecError(found) from None
    except MarkedYAMLError as exc:
        hint = "indent with spaces: YAML does not allow tabs" if "\\t" in str(exc) or "\t" in str(exc) else (
            "check the indentation and quoting around this position")
        raise _syntax_error(exc, source, _yaml_problem(exc), hint) from None
    except YAMLError as exc:
        raise SpecError([Located(source, 1, 1, "(top level)", f"not valid YAML: {exc}",
                                 "check the file is a YAML mapping of keys")]) from None
    doc = Document(source, None)
    problems: list[Problem] = []
    doc.data = _plain(root, (), doc, problems)
    if problems:
        raise SpecError([doc.locate(p) for p in problems])
    return doc


def load(path: str) -> Document:
    """Read and parse a spec file; an unreadable or empty file raises SpecError."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise SpecError([Located(path, 1, 1, "(file)", "no such file",
                                 "check the path; relative paths are relative to the current directory")]) from None
    except IsADirectoryError:
        raise SpecError([Located(path, 1, 1, "(file)", "is a directory, not a spec file",
                                 "pass the YAML file inside it")]) from None
    except UnicodeDecodeError as exc:
        raise SpecError([Located(path, 1, 1, "(file)", f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                                 "save the spec as UTF-8")]) from None
    except OSError as exc:
        raise SpecError([Located(path, 1, 1, "(file)", f"cannot read: {exc.strerror}",
                                 "check that the file is readable by this user")]) from None
    return parse(text, path)


def _yaml_problem(exc: MarkedYAMLError) -> str:
    text = " ".join(part for part in (exc.context, exc.problem) if part)
    return f"not valid YAML: {text}" if text else "not valid YAML"


def _duplicates(text: str, source: str) -> list[Located]:
    """Each key that appears twice in a mapping, with both lines: the composed node tree still has them
    (ruamel's error names only the mapping and the second one)."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    found: list[Located] = []

    def walk(node: Any, path: Path) -> None:
        if isinstance(node, MappingNode):
            first: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = key_node.value
                if key in first:
                    line = key_node.start_mark.line + 1
                    found.append(Located(source, line, key_node.start_mark.column + 1, format_path((*path, key)),
                                         f"key {key!r} appears twice in the same mapping (lines "
                                         f"{first[key].start_mark.line + 1} and {line})",
                                         "keep one of the two; YAML keys must be unique"))
                else:
                    first[key] = key_node
                walk(value_node, (*path, key))
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, (*path, index))

    try:
        walk(_yaml("rt").compose(io.StringIO(text)), ())
    except YAMLError:
        return []
    return found


def _syntax_error(exc: MarkedYAMLError, source: str, message: str, hint: str) -> SpecError:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    return SpecError([Located(source, line, col, "(syntax)", message, hint)])


def _plain(node: Any, path: Path, doc: Document, problems: list[Problem]) -> Any:
    """Convert ruamel nodes to plain data, recording positions and interpolating ${VAR}."""
    tag = getattr(getattr(node, "tag", None), "value", None)
    if isinstance(node, TaggedScalar) or tag:
        problems.append(Problem(path, f"YAML tags are not allowed (found {tag})",
                                "remove the tag and write a plain value; tfxd never constructs objects from YAML"))
        return None
    if isinstance(node, CommentedMap):
        result: dict[Any, Any] = {}
        for key in node:
            key_line, key_col = node.lc.key(key)
            value_line, value_col = node.lc.value(key)
            child = (*path, key)
            doc.keys[child] = Position(doc.source, key_line + 1, key_col + 1)
            if node[key] is None:  # an empty value: ruamel marks wherever the next token starts
                value_line, value_col = key_line, key_col + len(str(key)) + 1
            doc.values[child] = Position(doc.source, value_line + 1, value_col + 1)
            result[key] = _plain(node[key], child, doc, problems)
        return result
    if isinstance(node, CommentedSeq):
        items = []
        for index, item in enumerate(node):
            line, col = node.lc.item(index)
            child = (*path, index)
            doc.values[child] = Position(doc.source, line + 1, col + 1)
            items.append(_plain(item, child, doc, problems))
        return items
    if isinstance(node, str):
        return _interpolate(node, path, problems)
    return node


def _interpolate(value: str, path: Path, problems: list[Problem]) -> Any:
    """Replace ${VAR} and ${VAR:-default}; an unquoted scalar is re-read as YAML after."""
    if "$" not in value:
        return str(value)
    plain = type(value) is str  # quoted and block scalars load as str subclasses
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        missing.append(name)
        return ""

    result = _VAR.sub(replace, str(value))
    for name in missing:
        problems.append(Problem(path, f"environment variable {name} is not set",
                                f"export {name}=... or give a default: ${{{name}:-value}}"))
    if "${" in result and not missing:
        problems.append(Problem(path, f"malformed variable reference in {str(value)!r}",
                                "write ${VAR} or ${VAR:-default}; write $$ for a literal $"))
    if plain and result != str(value):
        read = read_scalar(result)
        return read if not isinstance(read, (dict, list)) else result
    return result
