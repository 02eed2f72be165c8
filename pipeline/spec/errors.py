"""Spec problems: where they are, what is wrong, and how to fix them."""

from __future__ import annotations

from dataclasses import dataclass

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """``("features", 2, "transform")`` -> ``features[2].transform``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong, at a key path relative to whoever raised it."""

    path: Path
    message: str
    hint: str | None = None


class Problems(ValueError):
    """Raised by model validators to report several problems at precise key paths."""

    def __init__(self) -> None:
        super().__init__("spec problems")
        self.items: list[Problem] = []

    def add(self, path: Path, message: str, hint: str | None = None) -> None:
        self.items.append(Problem(tuple(path), message, hint))

    def raise_if_any(self) -> None:
        if self.items:
            raise self


@dataclass(frozen=True)
class Located:
    """A problem placed in a file (or on the command line)."""

    source: str
    line: int
    col: int
    path: str
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        text = f"{self.source}:{self.line}:{self.col}: {self.path}: {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text


class SpecError(Exception):
    """The spec is wrong; carries every problem found, in file order."""

    def __init__(self, errors: list[Located]) -> None:
        self.errors = sorted(errors, key=lambda e: (e.source, e.line, e.col))
        super().__init__("\n".join(str(e) for e in self.errors))


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
