"""The buckets bench reads the summary of the replay it just ran: the newest run folder under the replay
root, which also holds the history page every replay rewrites (history.html, newer than any summary)."""

from __future__ import annotations

import json
import os
import time

from tests.bench import bench_module

buckets = bench_module("buckets")


def _run_folder(root, run_id: str, seconds: list[float]) -> None:
    folder = root / run_id
    folder.mkdir(parents=True)
    summary = {"status": "ok", "tasks": [{"seconds": value} for value in seconds]}
    (folder / "summary.json").write_text(json.dumps(summary))


def test_the_replays_summary_is_read_beside_the_history_page(tmp_path, monkeypatch):
    root = tmp_path / "replays"
    _run_folder(root, "20261205-035000-1", [1.0, 2.0])
    _run_folder(root, "20261205-035500-2", [3.0, 4.5])
    later = time.time() + 5
    os.utime(root / "20261205-035000-1" / "summary.json", (later - 60, later - 60))
    (root / "history.html").write_text("<html></html>")  # written last, as the replay does
    os.utime(root / "history.html", (later, later))
    ran = []
    monkeypatch.setattr(buckets.common, "measure", lambda command, **kwargs: ran.append(command))
    assert buckets._replay(["tfxd", "replay", "taxi.yaml"], str(tmp_path), str(tmp_path / "log")) == 7.5
    assert ran[0][:3] == ["tfxd", "replay", "taxi.yaml"] and ran[0][ran[0].index("--root") + 1] == str(root)
