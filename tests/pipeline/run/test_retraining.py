"""Retraining on new data, for real: taxi rows in one folder per day under data/{YYYY}-{MM}-{DD}/. The
newest day is read; a new day is read alone; nothing new trains nothing (or fails, when asked); a
window reads the newest days together; a given day reads that day; a missing day is refused naming
its path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, write_spec
from tests.pipeline.run.test_history import the_page_in_a_browser
from tests.pipeline.run.test_run_taxi import statuses, summaries, tfxd

SPEC = """\
tfxd: 1
name: daily-tips
data:
  format: csv
  path: data/{YYYY}-{MM}-{DD}/*.csv
features:
  - {name: trip_miles, transform: zscore}
  - {name: fare, transform: zscore}
  - {name: company, transform: vocabulary, top_k: 50}
label: {name: big_tipper, expr: "tips > fare * 0.2", task: binary}
training: {batch_size: 32, steps: 20, eval_steps: 5, seed: 1}
evaluation:
  thresholds: {binary_accuracy: {min: 0.3}}
beam: {workers: 1}
"""
ROWS_PER_DAY = 400


def add_day(project: Path, day: str, index: int) -> None:
    lines = (REPO / "examples" / "data" / "taxi" / "data.csv").read_text().splitlines()
    folder = project / "data" / day
    folder.mkdir(parents=True)
    rows = lines[1 + index * ROWS_PER_DAY: 1 + (index + 1) * ROWS_PER_DAY]
    (folder / "trips.csv").write_text("\n".join([lines[0], *rows]) + "\n")


@pytest.fixture(scope="module")
def daily(tmp_path_factory):
    project = tmp_path_factory.mktemp("daily")
    for index, day in enumerate(("2026-11-20", "2026-11-21", "2026-11-22")):
        add_day(project, day, index)
    write_spec(project, SPEC)
    return project


def _last(project: Path) -> dict:
    return summaries(project, "daily-tips")[-1]


def test_each_run_trains_on_the_new_day_and_nothing_new_trains_nothing(daily):
    first = tfxd("run", "spec.yaml", cwd=daily)
    assert first.returncode == 0, first.stdout + first.stderr
    summary = _last(daily)
    assert summary["examples"]["spans"] == ["2026-11-22"]
    assert sum(summary["examples"]["splits"].values()) == ROWS_PER_DAY
    assert summary["blessed"] and summary["pushed_to"]
    record = Path(summary["pushed_to"]) / "assets.extra" / "tfxd_data.json"
    recorded = json.loads(record.read_text())
    assert recorded["spans"] == ["2026-11-22"]
    assert sorted(recorded["inputs"]["features"]) == ["company", "fare", "trip_miles"]
    assert list(recorded["inputs"]["vocabularies"]) == ["company"]
    assert "(span 2026-11-22)" in first.stdout and f"history: {daily}/tfxd-runs/daily-tips/history.html" in first.stdout
    assert "Span read: <span class=\"mono\">2026-11-22</span>" in Path(summary["report"]).read_text()

    add_day(daily, "2026-11-23", 3)
    second = tfxd("run", "spec.yaml", cwd=daily)
    assert second.returncode == 0, second.stdout + second.stderr
    summary = _last(daily)
    assert summary["examples"]["spans"] == ["2026-11-23"] and statuses(summary)["ExampleGen"] == "ran"
    assert statuses(summary)["Trainer"] == "ran" and summary["blessed"]

    third = tfxd("run", "spec.yaml", cwd=daily)
    assert third.returncode == 0, third.stdout + third.stderr
    summary = _last(daily)
    assert summary["status"] == "skipped"
    assert summary["reason"].startswith("no new data: the spans to read (2026-11-23) are the ones the latest "
                                        "blessed model (")
    assert f"{summary['reason']}; the components after ExampleGen were skipped" in " ".join(third.stdout.split())
    # ExampleGen ran and found nothing new; TFX's condition skipped everything after it: a success
    assert statuses(summary) == {"ExampleGen": "ran", **{name: "skipped" for name in list(statuses(summary))[1:]}}
    assert "- Trainer skipped: no new data" in third.stdout and "ok Trainer" not in third.stdout
    assert summary["examples"] == {"spans": ["2026-11-23"]}
    assert "Skipped: no new data" in Path(summary["report"]).read_text()

    fourth = tfxd("run", "spec.yaml", cwd=daily)  # the same again: ExampleGen's decision comes from the cache
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    summary = _last(daily)
    assert summary["status"] == "skipped" and statuses(summary)["ExampleGen"] == "cached"

    refused = tfxd("run", "spec.yaml", "--set", "data.on_no_new_data=fail", cwd=daily)
    assert refused.returncode == 1
    assert "ExampleGen failed: " in refused.stderr and "data.on_no_new_data is fail" in refused.stderr

    _the_history_of_the_days(daily)


def _the_history_of_the_days(daily: Path) -> None:
    """A shifted day stopped by the drift gate, then `tfxd history` and history.html: the six runs, newest
    first, as their summaries say; the page in a real browser."""
    add_day(daily, "2026-11-24", 4)
    shift_fare(daily / "data" / "2026-11-24" / "trips.csv")
    stopped = tfxd("run", "spec.yaml", "--set", "validation.drift={threshold: 0.9, features: {fare: 0.2}}", cwd=daily)
    assert stopped.returncode == 1 and "the data drifted between span 2026-11-23 and span 2026-11-24" in stopped.stderr
    shutil.rmtree(daily / "data" / "2026-11-24")  # the module's days, as the tests after this one expect them
    shown = tfxd("history", "spec.yaml", "--json", cwd=daily)
    assert shown.returncode == 0, shown.stderr
    runs = json.loads(shown.stdout)
    assert [run["status"] for run in runs] == ["stopped", "failed", "skipped", "skipped", "ok", "ok"]
    assert [run["spans"] for run in runs] == [["2026-11-24"], []] + [["2026-11-23"]] * 3 + [["2026-11-22"]]
    assert runs[0]["drift"]["verdict"] == "stopped" and runs[0]["drift"]["feature"] == "fare"
    assert runs[2]["reason"].startswith("no new data: ") and runs[2]["examples"] == {}
    blessed = runs[4]
    assert blessed["blessed"] is True and (Path(blessed["pushed"]) / "saved_model.pb").is_file()
    assert sum(blessed["examples"].values()) == ROWS_PER_DAY and blessed["strategy"] and blessed["replicas"] == 1
    assert set(blessed["metrics"]) >= {"auc", "binary_accuracy"} and blessed["seconds"] > 0 and blessed["drift"] is None
    assert all(run["started"].startswith("20") for run in runs)
    table = tfxd("history", "spec.yaml", "--last", "4", cwd=daily)
    assert table.returncode == 0, table.stderr
    assert "daily-tips: 4 runs, newest first" in table.stdout
    assert "skipped (no new data: the spans to read (2026-11-23)" in table.stdout
    the_page_in_a_browser(daily / "tfxd-runs" / "daily-tips" / "history.html", evaluated=2)


def shift_fare(path: Path) -> None:
    """The meter changed: every fare of the day's file three times higher, plus 20."""
    import csv

    rows = list(csv.DictReader(path.read_text().splitlines()))
    for row in rows:
        row["fare"] = f"{float(row['fare'] or 0) * 3 + 20:.2f}"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_cache_sees_the_spans_read_and_their_files(tmp_path):
    """The same spans and files are cached all the way down; a file of the span read rewritten, or a new
    day, runs ExampleGen and what follows again; a change to a span not read changes nothing."""
    import os

    for index, day in enumerate(("2026-11-20", "2026-11-21")):
        add_day(tmp_path, day, index)
    write_spec(tmp_path, SPEC.replace("  path: data/{YYYY}-{MM}-{DD}/*.csv\n",
                                      "  path: data/{YYYY}-{MM}-{DD}/*.csv\n  on_no_new_data: train\n"))
    first = tfxd("run", "spec.yaml", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert set(statuses(_last(tmp_path)).values()) == {"ran"}
    second = tfxd("run", "spec.yaml", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    summary = _last(tmp_path)
    assert set(statuses(summary).values()) == {"cached"} and summary["examples"]["spans"] == ["2026-11-21"]
    assert summary["blessed"]

    read = tmp_path / "data" / "2026-11-21" / "trips.csv"  # a late correction of the day read
    lines = read.read_text().splitlines()
    read.write_text("\n".join(lines[:-1]) + "\n")
    os.utime(read, (read.stat().st_atime, read.stat().st_mtime + 5))
    third = tfxd("run", "spec.yaml", "--to", "StatisticsGen", cwd=tmp_path)
    assert third.returncode == 0, third.stdout + third.stderr
    summary = _last(tmp_path)
    assert statuses(summary) == {"ExampleGen": "ran", "StatisticsGen": "ran"}
    assert sum(summary["examples"]["splits"].values()) == ROWS_PER_DAY - 1

    older = tmp_path / "data" / "2026-11-20" / "trips.csv"  # a span this run does not read
    older.write_text(older.read_text() + older.read_text().splitlines()[1] + "\n")
    fourth = tfxd("run", "spec.yaml", "--to", "StatisticsGen", cwd=tmp_path)
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert set(statuses(_last(tmp_path)).values()) == {"cached"}

    add_day(tmp_path, "2026-11-22", 2)
    fifth = tfxd("run", "spec.yaml", "--to", "ExampleGen", cwd=tmp_path)
    assert fifth.returncode == 0, fifth.stdout + fifth.stderr
    summary = _last(tmp_path)
    assert statuses(summary) == {"ExampleGen": "ran"} and summary["examples"]["spans"] == ["2026-11-22"]


def test_a_window_reads_the_newest_days_together_and_a_given_day_reads_that_day(daily):
    if not (daily / "data" / "2026-11-23").exists():
        add_day(daily, "2026-11-23", 3)
    window = tfxd("run", "spec.yaml", "--to", "ExampleGen", "--set", "data.spans={window: 2}", cwd=daily)
    assert window.returncode == 0, window.stdout + window.stderr
    summary = _last(daily)
    assert summary["examples"]["spans"] == ["2026-11-22", "2026-11-23"]
    assert sum(summary["examples"]["splits"].values()) == 2 * ROWS_PER_DAY

    given = tfxd("run", "spec.yaml", "--to", "ExampleGen", "--set", "data.spans.span=2026-11-20", cwd=daily)
    assert given.returncode == 0, given.stdout + given.stderr
    assert _last(daily)["examples"]["spans"] == ["2026-11-20"]

    runs = len(summaries(daily, "daily-tips"))
    missing = tfxd("run", "spec.yaml", "--set", "data.spans.span=2026-11-19", cwd=daily)
    assert missing.returncode == 2
    assert f"no data for span 2026-11-19: nothing matches {daily}/data/2026-11-19/*.csv" in missing.stderr
    assert "present: 2026-11-20, 2026-11-21, 2026-11-22, 2026-11-23" in missing.stderr
    assert len(summaries(daily, "daily-tips")) == runs  # refused before anything ran

    (daily / "data" / "2026-11-24").mkdir()
    (daily / "data" / "2026-11-24" / "_SUCCESS").write_text("")
    empty = tfxd("validate", "spec.yaml", cwd=daily)
    assert empty.returncode == 2
    assert f"span 2026-11-24 ({daily}/data/2026-11-24) has no data file" in empty.stderr


def test_the_drift_gate_turned_on_later_stops_a_shifted_day_and_a_window_compares_its_newest_span(tmp_path):
    """The gate compares the newest span read with the newest span present before it, whether or not
    earlier runs had the gate on: that span's statistics are computed from its files and kept. With a window
    of three, the newest span is compared with the one before it, not the window with another."""
    for index, day in enumerate(("2026-11-20", "2026-11-21", "2026-11-22")):
        add_day(tmp_path, day, index)
    shift_fare(tmp_path / "data" / "2026-11-22" / "trips.csv")
    write_spec(tmp_path, SPEC)
    for day in ("2026-11-20", "2026-11-21"):  # daily runs without the gate
        earlier = tfxd("run", "spec.yaml", "--to", "StatisticsGen", "--set", f"data.spans.span={day}", cwd=tmp_path)
        assert earlier.returncode == 0, earlier.stdout + earlier.stderr
    store = tmp_path / "tfxd-runs" / "daily-tips" / "pipeline" / "tfxd_span_statistics"
    assert not store.exists()

    write_spec(tmp_path, SPEC + "validation:\n  drift: {threshold: 0.9, features: {fare: 0.2}}\n")
    stopped = tfxd("run", "spec.yaml", cwd=tmp_path)  # the gate on: the newest day, 2026-11-22
    assert stopped.returncode == 1
    message = stopped.stderr.replace("\n", " ")
    assert "ExampleValidator failed: the data drifted between span 2026-11-21 and span 2026-11-22: fare: " \
           "Jensen-Shannon distance " in message and "> threshold 0.2" in message
    summary = _last(tmp_path)
    assert statuses(summary)["Transform"] == "not run"  # stopped before training
    _says_the_drift_gate_stopped_it(summary, tmp_path)
    assert (store / "2026-11-21" / "FeatureStats.pb").is_file()  # computed from its files, and kept

    passed = tfxd("run", "spec.yaml", "--to", "ExampleValidator", "--set", "validation.drift.features.fare=0.99",
                  cwd=tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    drift = _last(tmp_path)["drift"]
    assert (drift["span"], drift["previous_span"], drift["beyond"]) == ("2026-11-22", "2026-11-21", {})
    fare = drift["columns"]["fare"]
    assert fare["measure"] == "Jensen-Shannon" and 0.2 < fare["distance"] < 0.99 and fare["threshold"] == 0.99
    assert drift["columns"]["company"]["measure"] == "L-infinity"
    assert "drift from span 2026-11-21 to 2026-11-22" in passed.stdout

    # a window of the three days, in a fresh root (no statistics kept): 2026-11-22 against 2026-11-21 alone
    window = tfxd("run", "spec.yaml", "--to", "ExampleValidator", "--set", "data.spans={window: 3}", "--set",
                  "root=window-root", cwd=tmp_path)
    assert window.returncode == 1
    message = window.stderr.replace("\n", " ")
    assert "the data drifted between span 2026-11-21 and span 2026-11-22: fare: Jensen-Shannon distance " in message
    kept = tmp_path / "window-root" / "pipeline" / "tfxd_span_statistics"
    assert sorted(path.name for path in kept.iterdir()) == ["2026-11-21", "2026-11-22"]


def _says_the_drift_gate_stopped_it(summary: dict, project: Path) -> None:
    """The summary, the report and `tfxd history` say why the run ended: the gate, its message, each
    column's distance and threshold."""
    assert (summary["status"], summary["stopped_by"]) == ("stopped", "drift")
    assert summary["reason"].startswith("the data drifted between span 2026-11-21 and span 2026-11-22: fare: ")
    stopped_on = summary["drift"]
    assert (stopped_on["span"], stopped_on["previous_span"], list(stopped_on["beyond"])) == \
        ("2026-11-22", "2026-11-21", ["fare"])
    assert stopped_on["columns"]["fare"]["threshold"] == 0.2 and stopped_on["columns"]["fare"]["distance"] > 0.2
    assert stopped_on["columns"]["company"]["threshold"] == 0.9  # the columns within theirs too
    assert "Stopped by the drift gate: the data drifted between span 2026-11-21" in Path(summary["report"]).read_text()
    [line] = json.loads(tfxd("history", "spec.yaml", "--json", "--last", "1", cwd=project).stdout)
    assert line["status"] == "stopped" and line["reason"] == summary["reason"]
    assert line["drift"] == {"verdict": "stopped", "span": "2026-11-22", "previous_span": "2026-11-21", "feature": "fare",
                             "distance": stopped_on["columns"]["fare"]["distance"], "threshold": 0.2}


def test_the_skew_gate_stops_an_eval_split_unlike_the_train_split_and_warns_when_asked(tmp_path):
    lines = (REPO / "examples" / "data" / "taxi" / "data.csv").read_text().splitlines()
    header = lines[0].split(",")
    fare = header.index("fare")
    for split, rows in (("train", lines[1:601]), ("eval", lines[601:801])):
        (tmp_path / "data" / split).mkdir(parents=True)
        if split == "eval":  # the eval data came from another meter
            rows = [",".join(f"{float(v or 0) * 3 + 20:.2f}" if i == fare else v for i, v in enumerate(row.split(",")))
                    for row in rows]
        (tmp_path / "data" / split / "trips.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    assert all(len(row.split(",")) == len(header) for row in lines[1:801])  # no quoted commas to split wrongly
    spec = SPEC.replace("path: data/{YYYY}-{MM}-{DD}/*.csv", "path: data\n  splits: {train: 'train/*', eval: 'eval/*'}")
    write_spec(tmp_path, spec + "validation:\n  skew: {threshold: 0.9, features: {fare: 0.2}}\n")

    stopped = tfxd("run", "spec.yaml", cwd=tmp_path)
    assert stopped.returncode == 1
    message = stopped.stderr.replace("\n", " ")
    assert "ExampleValidator failed: the train and eval splits differ: fare: Jensen-Shannon distance " in message
    assert "> threshold 0.2" in message and "validation.skew.action: warn" in message
    stopped_by_skew = _last(tmp_path)
    assert statuses(stopped_by_skew)["Transform"] == "not run"
    assert (stopped_by_skew["status"], stopped_by_skew["stopped_by"]) == ("stopped", "skew")
    assert list(stopped_by_skew["skew"]["beyond"]) == ["fare"]

    warned = tfxd("run", "spec.yaml", "--to", "Transform", "--set", "validation.skew.action=warn", cwd=tmp_path)
    assert warned.returncode == 0, warned.stdout + warned.stderr
    summary = _last(tmp_path)
    assert statuses(summary)["Transform"] == "ran"
    skew = summary["skew"]
    assert skew["columns"]["fare"]["distance"] > 0.2 and list(skew["beyond"]) == ["fare"]
    assert skew["columns"]["company"]["distance"] < 0.9 and skew["columns"]["company"]["measure"] == "L-infinity"
    assert "skew between train and eval: largest fare" in warned.stdout
    assert "Skew between the train and eval splits:" in Path(summary["report"]).read_text()


WARM_SPEC = SPEC.replace("seed: 1}", "seed: 1, warm_start: true}").replace(
    "transform: vocabulary, top_k: 50}", "transform: hash, buckets: 16}")  # a vocabulary renumbers day by day


def test_warm_start_continues_from_the_blessed_model_and_a_changed_feature_list_trains_from_scratch(tmp_path):
    for index, day in enumerate(("2026-11-20", "2026-11-21")):
        add_day(tmp_path, day, index)
    write_spec(tmp_path, WARM_SPEC)
    first = tfxd("run", "spec.yaml", "--set", "data.spans.span=2026-11-20", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    summary = _last(tmp_path)
    assert summary["training"]["warm_start"]["started"] is False
    assert summary["training"]["warm_start"]["reason"] == "no blessed model yet"
    assert "Trainer starts from scratch: no blessed model yet to warm-start from" in first.stdout
    assert summary["blessed"]
    model = Path(summary["artifacts"]["model"])
    trained = json.loads((model / "tfxd_training.json").read_text())

    second = tfxd("run", "spec.yaml", cwd=tmp_path)  # the new day
    assert second.returncode == 0, second.stdout + second.stderr
    summary = _last(tmp_path)
    warm = summary["training"]["warm_start"]
    assert warm["started"] is True and warm["reason"] is None
    assert warm["from"] == str(model / "Format-Serving")  # the resolver's latest blessed model: run 1's
    # the second model's weights before its first step are the first model's after its last
    assert warm["weights_checksum"] == pytest.approx(trained["weights_checksum"], rel=1e-9)
    assert f"Trainer warm-starts from {warm['from']}" in second.stdout.replace("\n", "")
    assert f'Warm-started from <span class="mono">{warm["from"]}</span>' in Path(summary["report"]).read_text()

    add_day(tmp_path, "2026-11-22", 2)
    write_spec(tmp_path, WARM_SPEC.replace("  - {name: company, transform: hash, buckets: 16}\n", ""))
    third = tfxd("run", "spec.yaml", cwd=tmp_path)
    assert third.returncode == 0, third.stdout + third.stderr
    summary = _last(tmp_path)
    warm = summary["training"]["warm_start"]
    assert warm["started"] is False and warm["reason"] == "the features changed (removed company)"
    assert warm["from"].startswith(str(tmp_path / "tfxd-runs" / "daily-tips" / "pipeline" / "Trainer" / "model"))
    assert ": the features changed (removed company); trained from scratch." in Path(summary["report"]).read_text()
    assert "cannot warm-start from" in third.stderr and "the features changed (removed company)" in third.stderr
