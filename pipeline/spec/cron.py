"""Check five-field cron expressions and IANA time zones before a scheduler sees them."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_NAMES = {
    "month": ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
    "day of week": ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
}
# Kubeflow recurring runs follow the cluster's clock, which is UTC: the only time zones they can honour
KFP_TIMEZONES = frozenset({"UTC", "Etc/UTC"})
_FIELDS = [("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7)]
_ITEM = re.compile(r"^(\*|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/([0-9]+))?$")


def cron_problem(expression: str) -> str | None:
    """None when ``expression`` is a valid 5-field cron, else what is wrong with it."""
    fields = expression.split()
    if len(fields) != 5:
        return (f"a cron needs 5 fields (minute hour day-of-month month day-of-week), "
                f"got {len(fields)} in {expression!r}")
    for text, (name, low, high) in zip(fields, _FIELDS, strict=True):
        for item in text.split(","):
            match = _ITEM.match(item)
            if not match:
                return f"the {name} field {text!r} is not cron syntax"
            base, step = match.groups()
            if step is not None and int(step) == 0:
                return f"the {name} field {text!r} has a step of 0"
            if step is not None and int(step) > high:  # runs once, as none would; KFP refuses one past a Go int
                return f"the {name} field {text!r} has a step beyond {high}"
            if base == "*":
                continue
            bounds = [_value(part, name) for part in base.split("-")]
            numbers = [value for value in bounds if value is not None and low <= value <= high]
            if len(numbers) < len(bounds):
                return f"the {name} field {text!r} is outside {low}-{high}"
            if len(numbers) == 2 and numbers[0] > numbers[1]:
                return f"the {name} field {text!r} has a range that runs backwards"
    return None


def with_sunday_as_zero(expression: str) -> str:
    """A valid ``expression`` with Sunday written 0 in its day of week, never 7: robfig/cron, which Kubeflow
    Pipelines parses crons with, takes days 0-6 only, and so do other parsers of the unix cron."""
    *fields, weekday = expression.split()
    return " ".join([*fields, ",".join(_sunday_as_zero(item) for item in weekday.split(","))])


def _sunday_as_zero(item: str) -> str:
    base, _, step = item.partition("/")
    low, _, high = base.partition("-")
    if base == "*" or _value(high or low, "day of week") != 7:
        return item
    start = _value(low, "day of week")
    if start == 7:  # 7, 7-7 or 7/n: Sunday alone
        return "0"
    days = f"{low}-6" + (f"/{step}" if step else "")  # low-7/n: the days up to Saturday, Sunday if n lands on it
    return f"{days},0" if start is not None and (7 - start) % int(step or 1) == 0 else days


def _value(text: str, field_name: str) -> int | None:
    if text.isdigit():
        return int(text)
    names = _NAMES.get(field_name, [])
    upper = text.upper()
    if upper in names:
        return names.index(upper) + (1 if field_name == "month" else 0)
    return None


def timezone_problem(name: str) -> str | None:
    """None when ``name`` is a known IANA time zone, else what is wrong."""
    if name.startswith("/") or ".." in name:
        return f"{name!r} is not an IANA time zone"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name!r}"
    return None
