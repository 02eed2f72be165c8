"""tfxd.spans: TFX's span placeholders in a data path, the spans present, and which of them a run reads."""

from __future__ import annotations

import datetime
import glob
import os

import pytest

from tfxd import spans


def _touch(root, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a,b\n1,2\n")


def test_dates_are_spans_by_days_since_1970_as_tfx_counts_them():
    assert spans.date_span(datetime.date(1970, 1, 2)) == 1
    assert spans.date_span(datetime.date(2026, 11, 23)) == 20780
    assert spans.span_date(20780) == datetime.date(2026, 11, 23)


@pytest.mark.parametrize("path, message", [
    ("data/{YYYY:4}-{MM}-{DD}/*.csv", "a date placeholder takes no width"),
    ("data/{MM}-{DD}/*.csv", "without the rest of the date"),
    ("data/{SPAN}/{YYYY}-{MM}-{DD}.csv", "both {SPAN} and a date"),
    ("data/v{VERSION}/*.csv", "{VERSION} without a span"),
    ("data/{SPAN}/{SPAN}.csv", "{SPAN} appears twice"),
    ("data/{SPAN:x}/*.csv", "the width must be a number of digits"),
    ("data/{DATE}/*.csv", "{DATE} in data/{DATE}/*.csv is not a placeholder"),
])
def test_patterns_that_cannot_match_are_refused_naming_the_placeholder(path, message):
    with pytest.raises(spans.SpanError) as raised:
        spans.SpanPattern.parse(path)
    assert message in str(raised.value)


def test_span_width_and_versions_newest_version_of_each_span(tmp_path):
    _touch(tmp_path, "export-0041/v1/a.csv", "export-0042/v1/a.csv", "export-0042/v2/a.csv", "export-42/v3/a.csv",
           "export-0043/v1/.hidden", "other/v1/a.csv")
    pattern = spans.SpanPattern.parse(str(tmp_path / "export-{SPAN:4}" / "v{VERSION}" / "*.csv"))
    found = pattern.find(glob.glob)
    assert [(f.span, f.version) for f in found] == [(41, 1), (42, 1), (42, 2), (43, 1)]  # export-42: 2 digits
    latest = spans.select(pattern, found, "latest")
    assert [(f.span, f.version) for f in latest] == [(43, 1)]
    assert pattern.files(latest[0], [], glob.glob, os.path.isdir) == []  # only a hidden file: no data
    two = spans.select(pattern, found, {"window": 2})
    assert [(f.span, f.version) for f in two] == [(42, 2), (43, 1)]
    assert pattern.files(two[0], [], glob.glob, os.path.isdir) == [str(tmp_path / "export-0042" / "v2" / "a.csv")]
    assert pattern.label(42) == 42 and pattern.where(42).endswith("export-0042/v*/*.csv")


def test_date_folders_window_given_day_and_split_patterns(tmp_path):
    _touch(tmp_path, "2026-11-21/train/a.csv", "2026-11-21/eval/b.csv", "2026-11-22/train/a.csv",
           "2026-11-22/eval/b.csv", "2026-02-30/train/a.csv", "notes/readme.csv")
    pattern = spans.SpanPattern.parse(str(tmp_path / "{YYYY}-{MM}-{DD}"))
    found = pattern.find(glob.glob)
    assert [pattern.label(f.span) for f in found] == ["2026-11-21", "2026-11-22"]  # 02-30 is no date
    day = spans.select(pattern, found, {"span": pattern.span_of("2026-11-21")})
    assert pattern.files(day[0], ["eval/*"], glob.glob, os.path.isdir) == [str(tmp_path / "2026-11-21/eval/b.csv")]
    assert len(pattern.files(day[0], [], glob.glob, os.path.isdir)) == 0  # folders only at its top
    with pytest.raises(spans.SpanError) as raised:
        spans.select(pattern, found, {"span": pattern.span_of("2026-11-23")})
    assert f"no data for span 2026-11-23: nothing matches {tmp_path}/2026-11-23" in str(raised.value)
    assert "present: 2026-11-21, 2026-11-22" in str(raised.value)
    with pytest.raises(spans.SpanError, match="data.spans.window is 3, and only 2 spans are present"):
        spans.select(pattern, found, {"window": 3})
    with pytest.raises(spans.SpanError, match="is not a date YYYY-MM-DD"):
        pattern.span_of("42")


def test_nothing_present_names_the_pattern(tmp_path):
    pattern = spans.SpanPattern.parse(str(tmp_path / "trips-{SPAN}.csv"))
    with pytest.raises(spans.SpanError) as raised:
        spans.select(pattern, pattern.find(glob.glob), "latest")
    assert f"no data matches {tmp_path}/trips-{{SPAN}}.csv (nothing matches {tmp_path}/trips-*.csv)" in str(
        raised.value)


def test_the_scheduled_day_is_the_schedule_time_or_refused_or_the_creation_day_when_the_spec_says_so():
    read = spans.scheduled_day("2026-11-23T02:00:00Z", -1)
    assert read == spans.ScheduledDay(datetime.date(2026, 11, 22), "the scheduled time, 2026-11-23, -1 day")
    assert spans.scheduled_day("2026-11-23T23:30:00-05:00", 0).day == datetime.date(2026, 11, 24)  # in UTC
    started = datetime.datetime(2026, 11, 25, 10, 22, tzinfo=datetime.timezone.utc)
    assert spans.scheduled_day("", -2, local_start=started) == spans.ScheduledDay(
        datetime.date(2026, 11, 23), "a local run: its start, 2026-11-25, -2 days")
    for unset, said in (("", "empty"), ("{{$.pipeline_job_schedule_time_utc}}", "left unfilled")):
        # a run started by hand, or KFP before 2.17: never guessed
        with pytest.raises(spans.SpanError, match=f"the placeholder was {said}.*span=YYYY-MM-DD.*"
                                                  "unscheduled: creation_time"):
            spans.scheduled_day(unset, 0)
        fallback = spans.scheduled_day(unset, -1, unscheduled="creation_time", create_time="2026-11-24T23:59:00Z")
        assert fallback == spans.ScheduledDay(datetime.date(2026, 11, 23), (
            f"no schedule time (the placeholder was {said}); data.spans.unscheduled: creation_time: the run's "
            "creation, 2026-11-24, -1 day"))
        with pytest.raises(spans.SpanError, match="filled in neither it nor the schedule time"):
            spans.scheduled_day(unset, 0, unscheduled="creation_time", create_time="{{$.pipeline_job_create_time_utc}}")
    with pytest.raises(spans.SpanError, match="not an RFC 3339 time"):
        spans.scheduled_day("yesterday", 0)
