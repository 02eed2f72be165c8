"""A task's `triggerPolicy.condition`, evaluated as the open-source KFP backend's driver evaluates it, for
`tfxd replay`. What the backend does, as read in kubeflow/pipelines (the same from 2.5.0 to 2.17.0):

- backend/src/v2/driver/driver.go (2.5) and container.go (2.14 on), `Container()`: the task's inputs are
  resolved first, then `expression.Condition(executorInput, condition)`; false records the execution as
  not triggered and the driver step succeeds.
- backend/src/v2/expression/expression.go, `Condition()`: a CEL program whose variables are the
  ExecutorInput's fields (so `inputs.artifacts['K'].artifacts[0]...`); an evaluation error, or a result
  that is not a bool, fails the driver, and so the task.
- backend/src/v2/metadata/converter.go, `toRuntimeArtifact`: an artifact's int and double custom
  properties reach `metadata` as numbers (CEL doubles), strings as strings.
- backend/src/v2/compiler/argocompiler/container.go: the executor step runs `when: condition != false`
  (Argo records it Skipped, a success); dag.go: a task that consumes another's outputs depends on it as
  `producer.Succeeded`, so the consumers of a skipped task are Omitted, and the run still succeeds.

Vertex AI evaluates the same PipelineSpec field, which TFX's compiler writes for it first.

The grammar is what TFX's compiler writes (tfx/orchestration/kubeflow/v2/compiler_utils.placeholder_to_cel):
parenthesised comparisons (==, <, >) of `inputs.artifacts['K'].artifacts[I].metadata['P']` or `.uri`
with number and string literals, `!(...)`, `&&` and `||`. Anything else is refused before a replay starts.
As in CEL, comparing a number with a string, a missing metadata key or an artifact index past the end
is an error, not false (TFX writes integers as doubles for this reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(r"\s*(?:(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
                    r"|(?P<op>&&|\|\||==|!=|<|>|!|\(|\)|\[|\]|\.)|(?P<name>[A-Za-z_]\w*))")


class ConditionError(ValueError):
    """A condition replay does not read (at load), or one that fails to evaluate, as the driver fails it."""


@dataclass(frozen=True)
class _Path:
    key: str
    index: int
    field: str  # "uri" or "metadata"
    name: str | None  # the metadata key


class Condition:
    """One parsed condition; ``evaluate(artifacts)`` with {input key: [runtime artifact records]}."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._tokens = self._tokenize(text)
        self._at = 0
        self._tree = self._or()
        if self._at != len(self._tokens):
            raise ConditionError(f"condition {text!r}: unexpected {self._tokens[self._at][1]!r}")

    def evaluate(self, artifacts: dict[str, list[dict[str, Any]]]) -> bool:
        value = self._value(self._tree, artifacts)
        if not isinstance(value, bool):
            raise ConditionError(f"condition {self.text!r}: evaluation error: return type is not bool, got {value!r}")
        return value

    # ---- parsing

    def _tokenize(self, text: str) -> list[tuple[str, Any]]:
        tokens: list[tuple[str, Any]] = []
        position = 0
        while position < len(text.rstrip()):
            match = _TOKEN.match(text, position)
            kind = match.lastgroup if match is not None and match.end() > position else None
            if match is None or kind is None:
                raise ConditionError(f"condition {text!r}: cannot read {text[position:].strip()[:20]!r}")
            raw = match.group(kind)
            value: Any = float(raw) if kind == "number" else raw[1:-1] if kind == "string" else raw
            tokens.append((kind, value))
            position = match.end()
        return tokens

    def _peek(self) -> tuple[str, Any] | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _take(self, value: str | None = None, kind: str | None = None) -> Any:
        token = self._peek()
        if token is None or (value is not None and token[1] != value) or (kind is not None and token[0] != kind):
            raise ConditionError(f"condition {self.text!r}: expected {value or kind}, found "
                                 f"{token[1] if token else 'the end'!r}")
        self._at += 1
        return token[1]

    def _binary(self, operator: str, operand) -> Any:
        tree = operand()
        while self._peek() == ("op", operator):
            self._at += 1
            tree = (operator, tree, operand())
        return tree

    def _or(self) -> Any:
        return self._binary("||", self._and)

    def _and(self) -> Any:
        return self._binary("&&", self._not)

    def _not(self) -> Any:
        if self._peek() == ("op", "!"):
            self._at += 1
            return ("!", self._not())
        left = self._atom()
        token = self._peek()
        if token and token[0] == "op" and token[1] in ("==", "!=", "<", ">"):
            self._at += 1
            return (token[1], left, self._atom())
        return left

    def _atom(self) -> Any:
        token = self._peek()
        if token == ("op", "("):
            self._at += 1
            tree = self._or()
            self._take(")")
            return tree
        if token and token[0] in ("number", "string"):
            self._at += 1
            return ("literal", token[1])
        return self._path()

    def _path(self) -> _Path:
        for part in ("inputs", ".", "artifacts", "["):
            self._take(part)
        key = self._take(kind="string")
        for part in ("]", ".", "artifacts", "["):
            self._take(part)
        index = self._take(kind="number")
        self._take("]")
        self._take(".")
        field = self._take(kind="name")
        if field == "uri":
            return _Path(key, int(index), "uri", None)
        if field != "metadata":
            raise ConditionError(f"condition {self.text!r}: an artifact's {field!r} is not read by replay "
                                 "(TFX's compiler writes .uri and .metadata['...'])")
        self._take("[")
        name = self._take(kind="string")
        self._take("]")
        return _Path(key, int(index), "metadata", name)

    # ---- evaluation (CEL's rules for these operators)

    def _value(self, tree: Any, artifacts: dict[str, list[dict[str, Any]]]) -> Any:
        if isinstance(tree, _Path):
            return self._read(tree, artifacts)
        operator = tree[0]
        if operator == "literal":
            return tree[1]
        if operator == "!":
            return not self._boolean(self._value(tree[1], artifacts))
        if operator in ("&&", "||"):
            left = self._boolean(self._value(tree[1], artifacts))
            if (operator == "&&" and not left) or (operator == "||" and left):
                return left
            return self._boolean(self._value(tree[2], artifacts))
        left, right = self._value(tree[1], artifacts), self._value(tree[2], artifacts)
        if isinstance(left, bool) or isinstance(right, bool) or (
                isinstance(left, str) != isinstance(right, str)):
            raise ConditionError(f"condition {self.text!r}: evaluation error: no such overload "
                                 f"{operator}({type(left).__name__}, {type(right).__name__})")
        return {"==": left == right, "!=": left != right, "<": left < right, ">": left > right}[operator]

    def _boolean(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ConditionError(f"condition {self.text!r}: evaluation error: no such overload for {value!r}")
        return value

    def _read(self, path: _Path, artifacts: dict[str, list[dict[str, Any]]]) -> Any:
        if path.key not in artifacts:
            raise ConditionError(f"condition {self.text!r}: evaluation error: no such key: {path.key}")
        records = artifacts[path.key]
        if path.index >= len(records):
            raise ConditionError(f"condition {self.text!r}: evaluation error: index {path.index} out of range "
                                 f"for input {path.key!r} ({len(records)} artifacts)")
        record = records[path.index]
        if path.field == "uri":
            return record.get("uri", "")
        metadata = record.get("metadata") or {}
        if path.name not in metadata:
            raise ConditionError(f"condition {self.text!r}: evaluation error: no such key: {path.name}")
        return runtime_value(metadata[path.name])


def runtime_value(value: Any) -> Any:
    """A metadata value as the driver's CEL sees it: every number a double (converter.go)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    return value
