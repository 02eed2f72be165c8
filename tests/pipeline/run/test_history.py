"""`tfxd history` (pipeline/run/history.py) on the odd roots a user meets: no runs yet, a run killed outright
(its log, no summary), a run going on now (the root's lock held), a summary an older tfxd wrote (keys
missing) and one cut short. Real runs' histories are in test_retraining.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, write_spec
from tests.pipeline.run.test_run_taxi import tfxd
from tfxd.pipeline.run.history import runs, write_page
from tfxd.pipeline.run.lock import lock_path

SPEC = """\
tfxd: 1
name: odd
data: {format: csv, path: data.csv}
features: [{name: x, transform: zscore}]
label: {name: y, task: binary}
"""

# an older tfxd's summary: no seconds, no stopped_by, no spans; a gate record in its drift
OLDER = {"pipeline": "odd", "run_id": "20261101-090000-000001", "status": "ok", "blessed": False,
         "evaluation": {"blessed": False, "reasons": ["accuracy 0.75 < 0.8"]},
         "examples": {"splits": {"train": 80, "eval": 20}},
         "strategy": {"strategy": "one_device", "replicas": 1}, "metrics": {"accuracy": 0.75, "note": "text"},
         "components": [{"name": "ExampleGen", "status": "ran", "seconds": 1.25},
                        {"name": "Trainer", "status": "ran", "seconds": 2.5}],
         "drift": {"span": "2", "previous_span": "1", "beyond": {},
                   "columns": {"a": {"distance": 0.3, "threshold": 0.9, "measure": "L-infinity"},
                               "b": {"distance": 0.2, "threshold": 0.25, "measure": "Jensen-Shannon"}}}}


def _project(tmp_path: Path) -> Path:
    (tmp_path / "data.csv").write_text("x,y\n1,0\n2,1\n")
    write_spec(tmp_path, SPEC)
    return tmp_path / "tfxd-runs" / "odd"


def _summary(root: Path, data: dict | str) -> None:
    folder = root / "runs" / (data["run_id"] if isinstance(data, dict) else "20261101-100000-000000")
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "run.log").write_text("...")
    (folder / "summary.json").write_text(json.dumps(data) if isinstance(data, dict) else data)


def _killed(root: Path, run_id: str) -> None:
    (root / "runs" / run_id / "logs").mkdir(parents=True)
    (root / "runs" / run_id / "logs" / "run.log").write_text("I1101 started\n")


def test_no_runs_yet_says_so_and_succeeds(tmp_path):
    _project(tmp_path)
    done = tfxd("history", "spec.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no runs of odd yet under " in done.stdout and "`tfxd run spec.yaml` makes the first" in done.stdout
    assert json.loads(tfxd("history", "spec.yaml", "--json", cwd=tmp_path).stdout) == []
    refused = tfxd("history", "spec.yaml", "--target", "kubeflow", cwd=tmp_path)
    assert refused.returncode == 2 and "the spec has no `targets.kubeflow` section" in refused.stderr


def test_an_older_summary_a_killed_run_and_a_summary_cut_short(tmp_path):
    root = _project(tmp_path)
    _summary(root, OLDER)
    _killed(root, "20261101-110000-000000")
    _summary(root, '{"pipeline": "odd", "run_')  # cut short: a full disk, an editor
    done = tfxd("history", "spec.yaml", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    killed, cut, older = json.loads(done.stdout)
    assert (killed["run_id"], killed["status"]) == ("20261101-110000-000000", "interrupted")
    assert killed["started"].startswith("2026-11-01T11:00:00")
    assert cut["status"] == "unknown" and cut["run_id"] == "20261101-100000-000000"
    assert older["status"] == "ok" and older["seconds"] == 3.8  # its components' time
    assert older["examples"] == {"train": 80, "eval": 20} and older["metrics"] == {"accuracy": 0.75}
    assert (older["strategy"], older["replicas"], older["blessed"], older["pushed"]) == ("one_device", 1, False, None)
    # the worst column is the one nearest its threshold (b: 0.2 of 0.25), not the largest distance (a: 0.3 of 0.9)
    assert older["drift"] == {"verdict": "within", "span": "2", "previous_span": "1", "feature": "b", "distance": 0.2,
                              "threshold": 0.25}
    table = tfxd("history", "spec.yaml", "--last", "1", cwd=tmp_path)
    assert "odd: 1 run, newest first" in table.stdout and "interrupted" in table.stdout
    # the page draws what there is and says what there is not
    page = Path(write_page(str(root), "odd", {"accuracy": {"min": 0.7, "max": None, "max_drop": None}})).read_text()
    assert page.count('<circle class="run notblessed"') == 1 and ">min 0.7</text>" in page
    assert "No span was compared with the one before it yet" not in page and "No run has pushed a model yet." in page
    assert 'data-metric="note"' not in page  # a metric that is not a number draws no chart


def test_the_newest_run_without_a_summary_is_running_while_the_roots_lock_is_held(tmp_path):
    root = _project(tmp_path)
    _killed(root, "20261101-110000-000000")
    _killed(root, "20261101-120000-000000")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from tfxd.pipeline.run.lock import hold\n"
        "with hold(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)"), str(root)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert [(line.run_id[9:15], line.status) for line, _ in runs(str(root))] == [("120000", "running"),
                                                                                     ("110000", "interrupted")]
    finally:
        holder.kill()
        holder.wait()
    assert [line.status for line, _ in runs(str(root))] == ["interrupted", "interrupted"]
    assert Path(lock_path(str(root))).exists()


def the_page_in_a_browser(page: Path, evaluated: int, metrics: tuple[str, ...] = ("binary_accuracy", "auc"),
                          stopped_by: str = "fare") -> None:
    """history.html as Chromium (headless) reads it: each of ``metrics``' charts has a point per evaluated
    run, the stopped run's drift cell names its feature; a screenshot kept in build/test-artifacts/."""
    from html.parser import HTMLParser

    browser = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir="
               + str(page.parent / ".chromium")]
    dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]

    class Seen(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.chart, self.points, self.stopped, self.in_stopped = None, {}, [], False

        def handle_starttag(self, tag, attrs):
            attributes = dict(attrs)
            if tag == "svg" and attributes.get("data-metric"):
                self.chart = attributes["data-metric"]
            if tag == "circle" and "run" in (attributes.get("class") or "").split():
                self.points[self.chart] = self.points.get(self.chart, 0) + 1
            self.in_stopped = tag == "td" and "stopped" in (attributes.get("class") or "").split() or (
                self.in_stopped and tag == "span")

        def handle_data(self, data):
            if self.in_stopped and data.strip():
                self.stopped.append(data.strip())

    seen = Seen()
    seen.feed(dom.stdout)
    assert all(seen.points.get(metric) == evaluated for metric in metrics), seen.points
    assert len(seen.stopped) == 1 and seen.stopped[0].endswith(f": stopped by {stopped_by}"), f"stopped: {seen.stopped}"
    shots = REPO / "build" / "test-artifacts"
    shots.mkdir(parents=True, exist_ok=True)
    shot = subprocess.run([*browser, "--window-size=1280,2400", f"--screenshot={shots / 'history.png'}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and (shots / "history.png").stat().st_size > 10_000, shot.stderr[-2000:]


def test_the_browser_check_bites_on_a_page_whose_stopped_run_is_not_named(tmp_path):
    """The judge of history.html above, on a page without a run a gate stopped: it fails, saying so."""
    root = _project(tmp_path)
    _summary(root, OLDER)
    page = Path(write_page(str(root), "odd", {}))
    with pytest.raises(AssertionError, match=r"stopped: \[\]"):
        the_page_in_a_browser(page, evaluated=1, metrics=("accuracy",), stopped_by="a")
