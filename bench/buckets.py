"""Buckets (issue 62): `tfxd replay` of taxi's Kubeflow file with its data, pipeline root and push destination
on a Cloud Storage API server (tests/buckets/: fake-gcs-server behind a TLS front, the replay in a network
namespace where Google's names lead there, every client by its own code), against the same replay with the
buckets mapped to local folders (the default without an emulator), alternating in this run.

What the ratio holds: TensorFlow's GCS filesystem opens a 64 MB read buffer for every file it reads
(tsl/platform/cloud/gcs_file_system.cc, the default block size), every request is an HTTPS round trip, and
Beam stages through the bucket. Target: the bucket costs at most half again the folder's time (<= 1.5x), so
that what runs on a cluster can be tested on every change.
"""

from __future__ import annotations

import json
import os
import sys
import time

import common

sys.path.insert(0, common.REPO)  # tests/buckets/ starts the server, as the suite does

NAME = "buckets"
TARGET = 1.5
BUCKET = "tfxd-bench"


def _compiled(folder: str, on_the_bucket: bool) -> str:
    """Taxi compiled for Kubeflow into ``folder``: on the bench's bucket, or as shipped (data in the project,
    roots on gs://my-bucket, which the replay maps to folders)."""
    from tests.kubeflow.on_bucket import on_bucket  # the suite's own rewrite of an example's paths
    from tfxd.kubeflow.compile import compile_to
    from tfxd.pipeline.spec.load import load_spec

    with open(common.TAXI_SPEC) as handle:
        text = handle.read()
    if on_the_bucket:
        text = on_bucket(text, BUCKET)
    else:
        os.symlink(os.path.join(common.REPO, "examples", "data"), os.path.join(folder, "data"))
    spec = os.path.join(folder, "taxi.yaml")
    with open(spec, "w") as handle:
        handle.write(text)
    return compile_to(load_spec(spec, target="kubeflow", check_files=not on_the_bucket), "kubeflow",
                      os.path.join(folder, "taxi-kubeflow.yaml"))


def _replay(command: list[str], project: str, log: str, env: dict[str, str] | None = None) -> float:
    root = os.path.join(project, "replays")
    common.measure(command + ["--project", project, "--root", root, "--param", 'train_args={"numSteps": 300}'],
                   cwd=project, env=env, log=log)
    # the root also holds the history page the replay rewrites (history.html): the newest run's folder
    runs = [run for run in os.listdir(root) if os.path.exists(os.path.join(root, run, "summary.json"))]
    newest = max(runs, key=lambda run: os.path.getmtime(os.path.join(root, run, "summary.json")))
    with open(os.path.join(root, newest, "summary.json")) as handle:
        summary = json.load(handle)
    if summary["status"] != "ok":
        raise RuntimeError(f"the replay ended {summary['status']}: {log}")
    return sum(task["seconds"] for task in summary["tasks"])


def run(quick: bool = False) -> dict:
    from pathlib import Path

    from tests.buckets.server import bucket_server

    scratch = common.scratch(NAME)
    projects = {side: os.path.join(scratch, side) for side in ("bucket", "folders")}
    for project in projects.values():
        os.makedirs(project)
    compiled = {side: _compiled(project, side == "bucket") for side, project in projects.items()}
    walls: dict[str, list[float]] = {"bucket": [], "folders": []}
    tasks: dict[str, list[float]] = {"bucket": [], "folders": []}
    requests = 0
    with bucket_server(Path(scratch) / "server") as server:
        server.create_bucket(BUCKET)
        server.upload_folder(Path(common.REPO) / "examples" / "data" / "taxi", BUCKET, "data/taxi")
        for index in range(1 if quick else 3):
            for side in ("bucket", "folders"):
                command = [common.TFXD, "replay", compiled[side]]
                start, seen = time.perf_counter(), len(server.front.seen.requests)
                log = os.path.join(scratch, f"{side}-{index}.log")
                if side == "bucket":
                    tasks[side].append(_replay(server.command(*command), projects[side], log, server.env()))
                    requests = len(server.front.seen.requests) - seen
                else:
                    tasks[side].append(_replay(command, projects[side], log))
                walls[side].append(time.perf_counter() - start)
    ratios = [b / f for b, f in zip(walls["bucket"], walls["folders"], strict=True)]
    ratio = common.stats(ratios)
    return {"name": NAME, "runs": len(ratios), "bucket_s": common.stats(walls["bucket"]),
            "folders_s": common.stats(walls["folders"]), "ratio": ratio,
            "bucket_tasks_s": common.stats(tasks["bucket"]), "folders_tasks_s": common.stats(tasks["folders"]),
            "requests_per_replay": requests,
            "targets": [common.target("Buckets", f"<= {TARGET}x", ratio["median"] <= TARGET)]}


def table_rows(result: dict) -> list[str]:
    b, f = result["bucket_s"], result["folders_s"]
    return [f"| Buckets: taxi's Kubeflow replay (300 steps) on a Cloud Storage API server vs on folders "
            f"({result['runs']} each, {result['requests_per_replay']} requests a replay) "
            f"| {b['median']:.1f} s (min {b['min']:.1f}, max {b['max']:.1f}) | {f['median']:.1f} s "
            f"| {common.md_ratio(result['ratio'])} | {common.judged(result['targets'][0])} |"]
