"""report.html: a self-contained page drawn from a run's summary, real TFDV statistics included,
that still renders when the run stopped early and escapes whatever text the summary carries."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import REPO
from tfxd.pipeline.report import html as report
from tfxd.run_summary import LocalRun

VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
HOSTILE = "<script>alert('x')</script>"


def render(summary: dict) -> str:
    """report.html's text for what a summary.json holds, read by its one reader (LocalRun.from_json)."""
    return report.render(LocalRun.from_json(summary))


CSV = "fare,company,tips\n1.5,Acme,0\n2.5,Blue Cab,1\n,Acme,0\n4.0,City,1\n"


class Checker(HTMLParser):
    """Strict enough: every non-void tag closes in order; counts tags and attributes seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self.attrs += attrs
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self.attrs += attrs

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]} ")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(text: str) -> Checker:
    checker = Checker()
    checker.feed(text)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []
    for tag in ("html", "head", "body", "title", "style"):
        assert checker.counts.get(tag) == 1, tag
    return checker


def assert_offline(text: str) -> None:
    lowered = text.lower()
    for needle in ("http://", "https://", "src=", "@import", "<script", "url("):
        assert needle not in lowered, needle


def write_stats(folder: Path, split: str, stats) -> None:
    """As StatisticsGen in TFX 1.16 lays it out: <uri>/Split-<split>/FeatureStats.pb, plain binary."""
    target = folder / f"Split-{split}"
    target.mkdir(parents=True, exist_ok=True)
    (target / "FeatureStats.pb").write_bytes(stats.SerializeToString())


def hand_stats(feature: str = "pickup_area", value: str = "north"):
    """A one-feature string split built by hand (no TFDV run needed)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    stats = statistics_pb2.DatasetFeatureStatisticsList()
    dataset = stats.datasets.add(num_examples=3)
    f = dataset.features.add(type=statistics_pb2.FeatureNameStatistics.STRING)
    f.path.step.append(feature)
    f.string_stats.common_stats.num_non_missing = 2
    f.string_stats.common_stats.num_missing = 1
    f.string_stats.unique = 1
    f.string_stats.top_values.add(value=value, frequency=2)
    return stats


@pytest.fixture(scope="module")
def stats_dir(tmp_path_factory) -> Path:
    """Real statistics from TFDV for train; a hand-built eval split."""
    import tensorflow_data_validation as tfdv
    from apache_beam.options.pipeline_options import PipelineOptions

    from tfxd.direct_runner import direct_args

    tmp = tmp_path_factory.mktemp("report")
    (tmp / "data.csv").write_text(CSV, encoding="utf-8")
    folder = tmp / "stats"
    # TFDV's own copy in the test's folder, on the direct runner as tfxd runs it (its defaults leave both)
    computed = tfdv.generate_statistics_from_csv(str(tmp / "data.csv"), output_path=str(tmp / "stats.tfrecord"),
                                                 pipeline_options=PipelineOptions(direct_args("in_memory", 1)))
    write_stats(folder, "train", computed)
    write_stats(folder, "eval", hand_stats())
    # the layout TFX itself reads back
    loaded = tfdv.load_stats_binary(str(folder / "Split-train" / "FeatureStats.pb"))
    assert [f.path.step[0] for f in loaded.datasets[0].features] == ["fare", "company", "tips"]
    return folder


def full_summary(stats: Path | str | None, blessed: bool = False) -> dict:
    history = [
        {"epoch": e, "loss": 0.7 - 0.1 * e, "binary_accuracy": 0.6 + 0.05 * e,
         "val_loss": 0.75 - 0.08 * e, "val_binary_accuracy": 0.58 + 0.05 * e}
        for e in range(1, 5)
    ]
    return {
        "pipeline": "taxi-tips",
        "run_id": "20261123-031500-123456",
        "components": [
            {"name": "ExampleGen", "status": "ran", "seconds": 12.3},
            {"name": "StatisticsGen", "status": "cached", "seconds": 0.4},
            {"name": "SchemaGen", "status": "ran", "seconds": 2.0},
            {"name": "ExampleValidator", "status": "ran", "seconds": 3.1},
            {"name": "Transform", "status": "ran", "seconds": 40.0},
            {"name": "Trainer", "status": "ran", "seconds": 80.0},
            {"name": "Evaluator", "status": "ran", "seconds": 30.5},
            {"name": "Pusher", "status": "not run", "seconds": 0.0},
        ],
        "examples": {"splits": {"train": 12000, "eval": 3002}, "bad_records": {"ragged row": 2},
                     "bad_records_total": 2},
        "strategy": {"strategy": "mirrored", "replicas": 2, "global_batch_size": 64, "precision": "float32",
                     "reason": "2 GPUs on one host", "devices": ["GPU:0", "GPU:1"]},
        "metrics": {"binary_accuracy": 0.78125, "auc": 0.8123, "example_count": 3002.0},
        "training": {"epochs": 4,
                     "metrics": {"loss": 0.3, "val_loss": 0.43, "binary_accuracy": 0.8, "val_binary_accuracy": 0.78},
                     "history": history},
        "evaluation": {"slices": [{"slice": "Overall", "metrics": {"binary_accuracy": 0.78125, "auc": 0.8123}},
                                  {"slice": "trip_start_hour=3", "metrics": {"binary_accuracy": 0.5, "auc": 0.61}}],
                       "blessed": blessed,
                       "reasons": [] if blessed else ["auc 0.8123 is below the threshold 0.85"],
                       "baseline": None},
        "anomalies": ["split eval: feature 'company': Unexpected string values"],
        "blessed": blessed,
        "pushed_to": "/runs/serving/1732330000" if blessed else None,
        "artifacts": {"statistics": str(stats) if stats is not None else None},
    }


def test_full_report(stats_dir: Path) -> None:
    text = render(full_summary(stats_dir))
    checker = parse(text)
    assert_offline(text)
    assert "taxi-tips" in text and "20261123-031500-123456" in text
    for name in ("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform", "Trainer",
                 "Evaluator", "Pusher"):
        assert f"<td>{name}</td>" in text
    assert "<td class=\"num\">80.0</td>" in text and '<div class="bar" style="width:100.0%">' in text
    assert '<div class="bar" style="width:50.0%">' in text  # Transform 40 s of the longest 80 s
    # banner: not blessed, with the reason
    assert 'class="banner notblessed">Model not blessed' in text
    assert "auc 0.8123 is below the threshold 0.85" in text
    assert "Not pushed." in text
    # data
    assert '<td>train</td><td class="num">12,000</td>' in text
    assert "Bad records skipped: 2" in text and "<td>ragged row</td>" in text
    # statistics from TFDV: fare has 1 missing of 4 (25%), mean of 1.5, 2.5, 4.0 = 2.6667
    assert text.index("Split train") < text.index("Split eval")
    train = text[text.index("Split train"):text.index("Split eval")]
    fare = re.search(r"<tr><td>fare</td>(.*?)</tr>", train).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", fare)
    assert cells == ["FLOAT", "3", "1", "25.0%", "1.5000", "2.6667", "1.0274", "4", "0"]
    company = re.search(r"<tr><td>company</td>(.*?)</tr>", train).group(1)
    assert re.findall(r"<td[^>]*>(.*?)</td>", company)[:5] == ["STRING", "4", "0", "0.0%", "3"]
    assert "Acme (2)" in company and "Blue Cab (1)" in company
    assert "<td>tips</td><td>INT</td>" in train
    assert "<td>pickup_area</td>" in text and "north (2)" in text
    # anomalies
    assert "split eval: feature &#x27;company&#x27;: Unexpected string values" in text
    # training: plan line, two charts (losses; binary_accuracy), four series with a point per epoch
    assert "Strategy: mirrored &times;2 replicas, global batch 64, float32 (2 GPUs on one host)" in text
    assert checker.counts["svg"] == 2 and checker.counts["polyline"] == 4
    polylines = re.findall(r'<polyline points="([^"]+)"', text)
    assert all(len(p.split()) == 4 for p in polylines)
    assert ">val_loss</text>" in text and ">val_binary_accuracy</text>" in text and ">epoch</text>" in text
    assert '<td>loss</td><td class="num">0.3000</td><td class="num">0.4300</td>' in text
    # evaluation: slices as rows, metrics as columns
    assert "<th>slice</th><th>binary_accuracy</th><th>auc</th>" in text
    assert '<td>Overall</td><td class="num">0.7812</td><td class="num">0.8123</td>' in text
    assert '<td>trip_start_hour=3</td><td class="num">0.5000</td><td class="num">0.6100</td>' in text
    assert "Blessing: not blessed" in text


def test_blessed_and_pushed(stats_dir: Path) -> None:
    text = render(full_summary(stats_dir, blessed=True))
    parse(text)
    assert 'class="banner blessed">Model blessed' in text
    assert "Pushed to <span class=\"mono\">/runs/serving/1732330000</span>" in text
    assert "not blessed" not in text


def test_write_is_atomic(tmp_path: Path, stats_dir: Path) -> None:
    target = tmp_path / "runs" / "r1" / "report.html"
    summary = full_summary(stats_dir)
    assert report.write(LocalRun.from_json(summary), str(target)) == str(target)
    assert target.read_text(encoding="utf-8") == render(summary)
    assert os.listdir(target.parent) == ["report.html"]


def test_stopped_at_transform(tmp_path: Path) -> None:
    """`--to Transform`: no training, no evaluation, no artifacts; as the local runner writes it."""
    summary = {
        "pipeline": "taxi-tips", "run_id": "r2",
        "components": [{"name": n, "status": "ran", "seconds": 1.0}
                       for n in ("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform")],
        "examples": {"splits": {"train": 10, "eval": 4}, "bad_records": {}, "bad_records_total": 0},
        "strategy": None, "metrics": {}, "blessed": False, "pushed_to": None,
    }
    text = render(summary)
    parse(text)
    assert_offline(text)
    assert "Not evaluated: the run stopped before Evaluator" in text
    assert "No statistics artifact recorded (StatisticsGen did not run)." in text
    assert "Not checked (ExampleValidator did not run" in text
    assert "Training did not run." in text
    assert "Evaluation did not run." in text
    assert "<svg" not in text
    report.write(LocalRun.from_json(summary), str(tmp_path / "report.html"))


@pytest.mark.parametrize("summary", [{}, {k: None for k in (
    "pipeline", "run_id", "components", "examples", "strategy", "metrics", "training", "evaluation",
    "anomalies", "blessed", "pushed_to", "artifacts")}, {"training": {"history": [{"epoch": 1}]},
                                                          "evaluation": {"slices": None}, "anomalies": []}])
def test_empty_summaries_render(summary: dict) -> None:
    text = render(summary)
    parse(text)
    assert "could not be drawn" not in text
    assert "Evaluation" in text and "Training" in text


def test_failed_run_banner() -> None:
    summary = {"pipeline": "p", "run_id": "r", "components": [
        {"name": "ExampleGen", "status": "ran", "seconds": 1.0},
        {"name": "Trainer", "status": "failed", "seconds": None},
        {"name": "Evaluator", "status": "not run", "seconds": 0.0}]}
    text = render(summary)
    parse(text)
    assert 'class="banner failed">Run failed in Trainer' in text
    assert '<span class="st-failed">failed</span>' in text


def test_single_epoch_and_odd_values() -> None:
    summary = {"training": {"metrics": {"val_auc": 0.7}, "history": [
        {"epoch": 1, "loss": float("nan"), "val_auc": 0.7, "note": "text"}]},
        "components": [{"name": "Trainer", "status": "ran", "seconds": "slow"}]}
    text = render(summary)
    parse(text)
    assert "could not be drawn" not in text
    assert '<td>auc</td><td class="num">&mdash;</td><td class="num">0.7000</td>' in text
    assert text.count("<svg") == 1  # auc only: NaN loss and text values are not plotted


def test_unreadable_statistics(tmp_path: Path) -> None:
    missing = render({"artifacts": {"statistics": str(tmp_path / "nope")}})
    parse(missing)
    assert "could not be read" in missing and "nope" in missing
    broken = tmp_path / "stats" / "Split-train"
    broken.mkdir(parents=True)
    (broken / "FeatureStats.pb").write_bytes(b"\xff\xff\xff\xff")
    (tmp_path / "stats" / "Split-eval").mkdir()
    write_stats(tmp_path / "stats", "test", hand_stats())
    text = render({"artifacts": {"statistics": str(tmp_path / "stats")}})
    parse(text)
    assert text.count("could not be read") == 2  # train is garbage, eval has no file
    assert "<td>pickup_area</td>" in text  # the readable split still shows


def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    write_stats(tmp_path / "stats", "train", hand_stats(feature=HOSTILE, value=HOSTILE))
    summary = {
        "pipeline": HOSTILE, "run_id": HOSTILE,
        "components": [{"name": HOSTILE, "status": HOSTILE, "seconds": 1.0}],
        "examples": {"splits": {HOSTILE: 1}, "bad_records": {HOSTILE: 1}},
        "strategy": {"strategy": HOSTILE, "reason": HOSTILE, HOSTILE: HOSTILE},
        "training": {"metrics": {HOSTILE: 1.0}, "history": [{"epoch": 1, HOSTILE: 0.5}, {"epoch": 2, HOSTILE: 0.4}]},
        "evaluation": {"slices": [{"slice": HOSTILE, "metrics": {HOSTILE: 0.1}}], "blessed": False,
                       "reasons": [HOSTILE], "baseline": HOSTILE},
        "anomalies": [HOSTILE], "blessed": False, "pushed_to": HOSTILE,
        "artifacts": {"statistics": str(tmp_path / "stats"), HOSTILE: HOSTILE},
    }
    text = render(summary)
    parse(text)
    assert_offline(text)
    assert "<script" not in text.lower()
    escaped = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
    assert text.count(escaped) >= 20
    assert f"<td>{escaped}</td><td>STRING</td>" in text  # the feature name from the statistics


def test_no_tensorflow_import(stats_dir: Path) -> None:
    """Importing and rendering (statistics included) needs protobuf only, never TensorFlow."""
    code = ("import sys, json; from tfxd.pipeline.report import html as report; "
            "from tfxd.run_summary import LocalRun; "
            f"text = report.render(LocalRun.from_json({full_summary(stats_dir)!r})); "
            "assert 'fare' in text and '2.6667' in text, text; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tensorflow_data_validation')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
