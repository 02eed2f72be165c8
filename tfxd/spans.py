"""Spans and versions in a data path, as TFX's ExampleGen reads them, and which of them a run reads.

`data.path` takes TFX's placeholders: ``{SPAN}`` (``{SPAN:4}``: exactly 4 digits, zero-padded),
``{VERSION}`` (``{VERSION:2}``) and the date ``{YYYY}``, ``{MM}``, ``{DD}``, whose span is the number of
days since 1970-01-01 (TFX's ``date_to_span_number``). TFX's own ExampleGen reads one span per
execution; a window of spans is a tfxd choice, so the resolution is tfxd's, here, and every caller
(`validate`, the ExampleGen executor on every runner) reads the same answer. ``glob`` and ``isdir``
are passed in: the local filesystem for `validate`, TFX's fileio (buckets too) in the executor.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PLACEHOLDER = re.compile(r"\{([A-Z]+)(?::([^}]*))?\}")
NAMES = ("SPAN", "VERSION", "YYYY", "MM", "DD")
DATE = ("YYYY", "MM", "DD")
_DATE_DIGITS = {"YYYY": 4, "MM": 2, "DD": 2}
EPOCH = datetime.date(1970, 1, 1)
SCHEDULED = "scheduled"
HINT = "use {SPAN} (or {SPAN:4}), {VERSION}, or the date {YYYY}, {MM} and {DD}, e.g. data/{YYYY}-{MM}-{DD}/*.csv"

Glob = Callable[[str], Sequence[str]]
IsDir = Callable[[str], bool]


class SpanError(ValueError):
    """A pattern that cannot match, or spans asked for that are not there: what is wrong and the fix."""


def has_placeholders(path: str) -> bool:
    """Any {NAME} in capitals: one of TFX's placeholders, or a misspelt one that parse() names."""
    return PLACEHOLDER.search(path) is not None


def date_span(day: datetime.date) -> int:
    return (day - EPOCH).days


def span_date(span: int) -> datetime.date:
    return EPOCH + datetime.timedelta(days=span)


@dataclass(frozen=True)
class Found:
    """One span (and version) present: ``root`` is the file or folder the placeholders matched."""

    span: int
    version: int | None
    root: str


@dataclass(frozen=True)
class SpanPattern:
    path: str
    dated: bool
    widths: dict[str, int | None]  # placeholder -> its digits (None: any number of them)

    @classmethod
    def parse(cls, path: str) -> SpanPattern:
        """The pattern in ``path``; SpanError when its placeholders cannot match (as TFX refuses them)."""
        widths: dict[str, int | None] = {}
        for match in PLACEHOLDER.finditer(path):
            name, width = match.group(1), match.group(2)
            if name not in NAMES:
                raise SpanError(f"{match.group(0)} in {path} is not a placeholder; {HINT}")
            if name in widths:
                raise SpanError(f"{{{name}}} appears twice in {path}; a span is named once")
            if name in DATE and width is not None:
                raise SpanError(f"{match.group(0)} in {path}: a date placeholder takes no width ({{{name}}} is "
                                f"always {_DATE_DIGITS[name]} digits); write {{{name}}}")
            if width is not None and not (width.isdigit() and int(width) > 0):
                raise SpanError(f"{match.group(0)} in {path}: the width must be a number of digits, e.g. {{{name}:4}}")
            widths[name] = int(width) if width is not None else _DATE_DIGITS.get(name)
        dated = [name for name in DATE if name in widths]
        if dated and len(dated) != len(DATE):
            named = ", ".join("{" + name + "}" for name in dated)
            raise SpanError(f"{path} has {named} without the rest of the date; "
                            "a date span needs {YYYY}, {MM} and {DD}")
        if dated and "SPAN" in widths:
            raise SpanError(f"{path} has both {{SPAN}} and a date; the date is the span, use one of them")
        if "VERSION" in widths and not ("SPAN" in widths or dated):
            raise SpanError(f"{path} has {{VERSION}} without a span; add {{SPAN}} or a date")
        if not ("SPAN" in widths or dated):
            raise SpanError(f"{path} has no span placeholder; {HINT}")
        return cls(path, bool(dated), widths)

    @property
    def _split(self) -> tuple[str, str]:
        """(the path up to the end of the last part holding a placeholder, what follows it)."""
        last = max(match.end() for match in PLACEHOLDER.finditer(self.path))
        slash = self.path.find("/", last)
        return (self.path, "") if slash < 0 else (self.path[:slash], self.path[slash + 1:])

    @property
    def rest(self) -> str:
        """What follows the span's own folder or file in the path ("" when the path ends there)."""
        return self._split[1]

    @property
    def base(self) -> str:
        """The folder before the first placeholder: nothing in it varies with the span."""
        first = PLACEHOLDER.search(self.path).start()  # type: ignore[union-attr]
        return self.path[:first].rpartition("/")[0] or "/"

    def glob(self) -> str:
        """The roots of every span: each placeholder as a wildcard."""
        return PLACEHOLDER.sub("*", self._split[0])

    def find(self, glob: Glob) -> list[Found]:
        """Every span (and version) present, oldest first."""
        regex = re.compile(self._regex())
        found = []
        for root in sorted(glob(self.glob())):
            match = regex.fullmatch(root.rstrip("/"))
            if match is None:
                continue
            values = match.groupdict()
            if self.dated:
                try:
                    span = date_span(datetime.date(int(values["YYYY"]), int(values["MM"]), int(values["DD"])))
                except ValueError:  # 2026-02-30: not a date, so not a span
                    continue
            else:
                span = int(values["SPAN"])
            version = int(values["VERSION"]) if values.get("VERSION") is not None else None
            found.append(Found(span, version, root.rstrip("/")))
        return sorted(found, key=lambda f: (f.span, f.version or 0))

    def _regex(self) -> str:
        parts, position = [], 0
        root = self._split[0].rstrip("/")
        for match in PLACEHOLDER.finditer(root):
            parts.append(_glob_regex(root[position:match.start()]))
            width = self.widths[match.group(1)]
            parts.append(f"(?P<{match.group(1)}>\\d{{{width}}})" if width else f"(?P<{match.group(1)}>\\d+)")
            position = match.end()
        parts.append(_glob_regex(root[position:]))
        return "".join(parts)

    def label(self, span: int) -> str | int:
        """A span as it reads in the path: the date (2026-11-23) for a date pattern, else the number."""
        return span_date(span).isoformat() if self.dated else span

    def span_of(self, value: str | int | datetime.date) -> int:
        """A span given by a person (`2026-11-23`, `42`; YAML reads the first as a date) as its number; SpanError naming the form wanted."""
        text = str(value)
        if self.dated:
            try:
                return date_span(datetime.date.fromisoformat(text))
            except ValueError:
                raise SpanError(f"span {text!r} is not a date YYYY-MM-DD, which {self.path} needs") from None
        if not text.isdigit():
            raise SpanError(f"span {text!r} is not a span number, which {self.path} needs (e.g. 42)")
        return int(text)

    def where(self, span: int) -> str:
        """The path with the span's placeholders filled in (the version left as a wildcard)."""
        day = span_date(span) if self.dated else None

        def fill(match: re.Match[str]) -> str:
            name, width = match.group(1), self.widths.get(match.group(1))
            if name == "SPAN":
                return str(span).zfill(width or 0)
            if day is not None and name in DATE:
                return {"YYYY": f"{day.year:04d}", "MM": f"{day.month:02d}", "DD": f"{day.day:02d}"}[name]
            return "*"

        return PLACEHOLDER.sub(fill, self.path)

    def files(self, found: Found, patterns: Sequence[str], glob: Glob, isdir: IsDir) -> list[str]:
        """The data files of one span: under its root, the rest of the path, or each split's pattern, or,
        for a root that is a folder, the files in it. Hidden files (`.`, `_`) are left out."""
        rest = self._split[1]
        if rest:
            wanted = [os.path.join(found.root, rest)]
        elif isdir(found.root):
            wanted = [os.path.join(found.root, pattern) for pattern in patterns or ["*"]]
        else:
            wanted = [found.root]
        files = sorted({path for pattern in wanted for path in glob(pattern)})
        return [path for path in files if not isdir(path) and not os.path.basename(path).startswith((".", "_"))]

    def files_of(self, chosen: Sequence[Found], patterns: Sequence[str], glob: Glob, isdir: IsDir) -> list[str]:
        """The data files of every span ``chosen`` (as files() finds them); SpanError naming a span that
        has none: an empty span folder is a partition that did not land whole."""
        found_files = []
        for found in chosen:
            in_span = self.files(found, patterns, glob, isdir)
            if not in_span:
                raise SpanError(f"span {self.label(found.span)} ({found.root}) has no data file"
                                + (f" matching {', '.join(patterns)}" if patterns else ""))
            found_files += in_span
        return found_files


UNSCHEDULED = ("fail", "creation_time")  # data.spans.unscheduled: what a run without a schedule time reads


def _moment(text: str) -> datetime.datetime | None:
    """An RFC 3339 time as the engine filled it in; None for one it left empty or unfilled (`{{...}}`)."""
    text = text.strip()
    if not text or text.startswith("{{"):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SpanError(f"the time {text!r} the engine passed is not an RFC 3339 time") from None
    return moment.astimezone(datetime.timezone.utc) if moment.tzinfo is not None else moment


@dataclass(frozen=True)
class ScheduledDay:
    """The day `{span: scheduled}` reads and why, in words for the log and the summary: which time it
    came from (only dates, so that every run of one day reads, and caches, alike)."""

    day: datetime.date
    why: str


def scheduled_day(schedule_time: str, offset_days: int, *, unscheduled: str = "fail", create_time: str = "",
                  local_start: datetime.datetime | None = None) -> ScheduledDay:
    """The day a run reads under `{span: scheduled}`: its schedule time (RFC 3339, as Vertex and KFP 2.17+
    fill ``{{$.pipeline_job_schedule_time_utc}}``) plus ``offset_days``. A local run reads by its start
    (``local_start``). A run with no schedule time (started by hand, or on KFP before 2.17, which leaves
    the placeholder unfilled or empty) is refused with ``unscheduled: fail``; with ``creation_time`` it
    reads by the day the run was created (``{{$.pipeline_job_create_time_utc}}``), never by the moment
    this task happens to start, which a late start or a retry after midnight would move to another day."""
    shift = f"{offset_days:+d} day{'s' if abs(offset_days) != 1 else ''}"
    if local_start is not None:
        base, why = local_start.date(), f"a local run: its start, {local_start.date()}"
    elif (scheduled := _moment(schedule_time)) is not None:
        base, why = scheduled.date(), f"the scheduled time, {scheduled.date()}"
    else:
        unfilled = "left unfilled" if schedule_time.strip().startswith("{{") else "empty"
        if unscheduled != "creation_time":
            raise SpanError(f"span: scheduled needs the run's schedule time, and the engine passed none (the "
                            f"placeholder was {unfilled}: a run started by hand, or Kubeflow Pipelines before 2.17, "
                            "which does not fill it); start the run from its schedule, give the day with the run "
                            "parameter span=YYYY-MM-DD, or set data.spans.unscheduled: creation_time to read by "
                            "the day the run was created")
        created = _moment(create_time)
        if created is None:
            raise SpanError("span: scheduled with unscheduled: creation_time needs the run's creation time, and "
                            "the engine filled in neither it nor the schedule time; give the day with the run "
                            "parameter span=YYYY-MM-DD")
        base, why = created.date(), (f"no schedule time (the placeholder was {unfilled}); data.spans.unscheduled: "
                                     f"creation_time: the run's creation, {created.date()}")
    return ScheduledDay(base + datetime.timedelta(days=offset_days), f"{why}, {shift}" if offset_days else why)


def newest_versions(found: list[Found]) -> list[Found]:
    """Each span present once, at its newest version, oldest span first (``found`` as find() lists it)."""
    newest: dict[int, Found] = {}
    for item in found:  # oldest version first, so the newest stays
        newest[item.span] = item
    return [newest[span] for span in sorted(newest)]


def select(pattern: SpanPattern, found: list[Found], choice: dict[str, int] | str) -> list[Found]:
    """The spans a run reads, oldest first, each at its newest version: ``choice`` is "latest",
    {"window": N} (the N newest spans present) or {"span": N}."""
    if not found:
        raise SpanError(f"no data matches {pattern.path} (nothing matches {pattern.glob()}); check the path, or "
                        "that the first span has landed")
    newest = {item.span: item for item in newest_versions(found)}
    spans = sorted(newest)
    present = ", ".join(str(pattern.label(span)) for span in spans[-5:]) + (" ..." if len(spans) > 5 else "")
    if choice == "latest":
        return [newest[spans[-1]]]
    if isinstance(choice, dict) and "window" in choice:
        if choice["window"] > len(spans):
            raise SpanError(f"data.spans.window is {choice['window']}, and only {len(spans)} span"
                            f"{'s are' if len(spans) != 1 else ' is'} present under {pattern.path} ({present}); "
                            "lower the window or wait for more data")
        return [newest[span] for span in spans[-choice["window"]:]]
    if isinstance(choice, dict) and "span" in choice:
        if choice["span"] not in newest:
            raise SpanError(f"no data for span {pattern.label(choice['span'])}: nothing matches "
                            f"{pattern.where(choice['span'])} (present: {present}); the partition may not have "
                            "landed yet, or give another span")
        return [newest[choice["span"]]]
    raise SpanError(f"unknown span choice {choice!r}")


def _glob_regex(text: str) -> str:
    """A glob fragment as a regex within one path: * and ? stop at '/', [...] stays a class."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in text[i + 1:]:
            end = text.index("]", i + 1)
            body = text[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)
