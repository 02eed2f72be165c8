"""The report's HTML pieces: escaping whatever a summary holds (strings come from specs, data and error
messages), numbers as people read them, and tables."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any


def escape(value: Any) -> str:
    """HTML-escaped text of any value: summary strings come from specs, data and error messages."""
    return html.escape(str(value), quote=True)


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else []


def number(value: Any) -> float | None:
    """A finite float, or None for anything that is not a usable number (None, NaN, text, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def fmt(value: Any) -> str:
    """Numbers as people read them: counts without decimals, metrics with four (escaped text)."""
    if value is None:
        return "&mdash;"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return escape(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.4g}"
        return f"{value:,.4f}"
    return escape(value)


def table(headers: Iterable[str], rows: Iterable[Iterable[tuple[str, bool | str]]]) -> str:
    """An HTML table; cells are (already-escaped html, True for a number or a CSS class name)."""
    out = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr>"]
    for row in rows:
        cells = []
        for content, kind in row:
            css = "num" if kind is True else (kind or "")
            cells.append(f'<td class="{css}">{content}</td>' if css else f"<td>{content}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
