"""The one place tfxd talks to the user: a line per step, errors on stderr."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def step(message: str) -> None:
    """A line of progress, e.g. a component starting or finishing."""
    out.print(f"[cyan]>[/] {escape(message)}")


def success(message: str) -> None:
    out.print(f"[green]ok[/] {escape(message)}")


def info(message: str) -> None:
    out.print(escape(message))


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}")


def error(message: str) -> None:
    err.print(f"[red]error:[/] {escape(message)}")


def raw(text: str) -> None:
    """Machine-readable output (YAML, JSON): printed as is, no markup."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
