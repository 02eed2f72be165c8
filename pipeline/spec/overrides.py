"""``--set key.path=value`` overrides, applied to the loaded YAML before validation."""

from __future__ import annotations

import re
from typing import Any

from tfxd.pipeline.spec.errors import Located, SpecError
from tfxd.pipeline.spec.yaml_source import Document, Position, read_scalar

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class OverrideSyntaxError(ValueError):
    """A ``--set`` argument that is not ``key.path=value`` (a command-line mistake)."""


def parse_path(text: str) -> tuple[str | int, ...]:
    """``features[0].fill`` or ``features.0.fill`` -> ("features", 0, "fill")."""
    parts: list[str | int] = []
    position = 0
    for match in _SEGMENT.finditer(text):
        gap = text[position:match.start()]
        if gap not in ("", "."):
            raise OverrideSyntaxError(f"cannot read key path {text!r}")
        key, index = match.groups()
        parts.append(int(index) if index is not None else (int(key) if key.isdigit() else key))
        position = match.end()
    if not parts or text[position:] or text.startswith(".") or ".." in text:
        raise OverrideSyntaxError(f"cannot read key path {text!r}: write it like training.steps or features[0].fill")
    return tuple(parts)


def apply(doc: Document, assignments: list[str]) -> None:
    """Apply every ``key.path=value`` to ``doc``; values are read as YAML."""
    problems: list[Located] = []
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key.strip():
            raise OverrideSyntaxError(f"--set {assignment!r}: expected key.path=value, e.g. training.steps=200")
        path = parse_path(key.strip())
        source = f"--set {assignment}"
        where = Position(source, 1, len(key) + 2)
        try:
            _assign(doc.data, path, read_scalar(raw))
        except LookupError as exc:
            problems.append(Located(source, 1, 1, key.strip(), str(exc),
                                    "check the key path against `tfxd render SPEC`"))
            continue
        doc.values[path] = where
        doc.keys[path] = Position(source, 1, 1)
    if problems:
        raise SpecError(problems)


def _assign(data: Any, path: tuple[str | int, ...], value: Any) -> None:
    node = data
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, list) and isinstance(part, int):
            if part >= len(node):
                raise LookupError(f"index {part} is past the end of a list of {len(node)}")
            if last:
                node[part] = value
            else:
                node = node[part]
        elif isinstance(node, dict):
            key = str(part)
            if last:
                node[key] = value
            else:
                if node.get(key) is None:
                    node[key] = {}
                node = node[key]
        else:
            raise LookupError(f"cannot set {part!r} inside a {type(node).__name__} value")
