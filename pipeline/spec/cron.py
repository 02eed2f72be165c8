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
            if base == "*":
                continue
            bounds = [_value(part, name) for part in base.split("-")]
            numbers = [value for value in bounds if value is not None and low <= value <= high]
            if len(numbers) < len(bounds):
                return f"the {name} field {text!r} is outside {low}-{high}"
            if len(numbers) == 2 and numbers[0] > numbers[1]:
                return f"the {name} field {text!r} has a range that runs backwards"
    return None


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
