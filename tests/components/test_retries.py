"""Kubeflow and Vertex retry a failed task in place, on the same output URIs: each tfxd executor starts
from an empty output folder, so a retry never mixes with what its killed first attempt left there."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.components.example_gen.conftest import EXTERNAL, spec_text
from tests.conftest import REPO

ATTEMPT = """
import json, sys
from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
from tfx.types import standard_artifacts
from tfxd.components.example_gen import executor
from tfxd.direct_runner import direct_args
from tfxd.pipeline.assembly.dag import nodes
from tfxd.pipeline.spec.load import load_spec

spec, out = sys.argv[1], sys.argv[2]
properties = dict(nodes(load_spec(spec, check_files=False), to="ExampleGen")[0].exec_properties)
examples = standard_artifacts.Examples()
examples.uri = out + "/examples"
context = BaseBeamExecutor.Context(beam_pipeline_args=direct_args("in_memory", 1), tmp_dir=out + "/tmp",
                                   unique_id="1")
executor.Executor(context).Do({}, {"examples": [examples]}, properties)
print(json.dumps(examples.split_names))
"""


def _attempt(spec: Path, out: Path, temp: Path | None = None) -> subprocess.Popen:
    """``temp``: a temporary folder of its own, for an attempt the test kills (it cannot clean up)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if temp is not None:
        temp.mkdir()
        env["TMPDIR"] = str(temp)
    return subprocess.Popen([sys.executable, "-c", ATTEMPT, str(spec), str(out)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _count(folder: Path) -> int:
    import tensorflow as tf

    files = tf.io.gfile.glob(str(folder / "*"))  # as TFX's readers glob a split's folder
    return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))


@pytest.mark.reliability("crash point")
def test_example_gen_retried_on_the_same_uris_after_a_kill_holds_only_the_retrys_examples(tmp_path):
    rows = (EXTERNAL / "csv" / "data.csv").read_text().splitlines()
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text({"format": "csv", "path": str(tmp_path / "data.csv")}))
    out = tmp_path / "out"
    first = _attempt(spec, out, temp=tmp_path / "killed-tmp")
    deadline = time.monotonic() + 240
    while not any((out / "examples").rglob("*")) and first.poll() is None:  # it has begun writing
        assert time.monotonic() < deadline, first.stderr.read() if first.stderr else ""
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    # whatever the kill left, and what a first attempt with another shard count leaves: an extra shard
    train = out / "examples" / "Split-train"
    train.mkdir(parents=True, exist_ok=True)
    (train / "data_tfrecord-00001-of-00002.gz").write_bytes(b"half a shard")
    (train / "beam-temp-data_tfrecord-0123").mkdir(exist_ok=True)

    second = _attempt(spec, out)
    stdout, stderr = second.communicate(timeout=300)
    assert second.returncode == 0, stderr[-3000:]
    assert json.loads(stdout.strip().splitlines()[-1]) == '["train", "eval"]'
    assert not (train / "data_tfrecord-00001-of-00002.gz").exists()
    assert not list(train.glob("beam-temp-*"))
    assert _count(train) + _count(out / "examples" / "Split-eval") == len(rows) - 1  # each row once


def test_every_tfxd_executor_empties_its_outputs_first():
    """Each Do that starts a task's work begins with empty_outputs (read off the source: a new executor
    without it fails here)."""
    starts = {}
    for path in sorted((REPO / "components").glob("*/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Executor"):  # the operators' share one
                do = next((item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "Do"), None)
                if do is not None:
                    calls = [ast.unparse(call.func) for call in ast.walk(do) if isinstance(call, ast.Call)]
                    starts[str(path.relative_to(REPO))] = any(call.endswith("empty_outputs") for call in calls)
    assert len(starts) == 10, starts
    assert all(starts.values()), {path: begins for path, begins in starts.items() if not begins}
