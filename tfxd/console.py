"""The one place tfxd talks to the user: a line per step, errors on stderr."""

from __future__ import annotations

import os
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


def keep_terminal() -> None:
    """Point the console at private copies of the terminal's stdout/stderr file descriptors, so that
    tfxd's lines still reach the user after fd 2 is sent to a run's log file."""
    global out, err
    out = Console(file=os.fdopen(os.dup(1), "w", buffering=1), highlight=False, soft_wrap=True)
    err = Console(file=os.fdopen(os.dup(2), "w", buffering=1), highlight=False, soft_wrap=True)
