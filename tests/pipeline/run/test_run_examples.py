"""The digits example end to end, as shipped: it meets its accuracy floor, is blessed and pushed. (The taxi
example has its own module; penguin runs as shipped with its data, root and push on a bucket:
test_run_on_bucket.py.)"""

from __future__ import annotations

import pytest

from tests.pipeline.run.test_run_taxi import (
    EXAMPLE_ARGS,
    example_project,
    statuses,
    summaries,
    tfxd,
)


@pytest.mark.parametrize(("example", "pipeline", "metric"), [
    ("digits", "digits-cnn", "sparse_categorical_accuracy"),
])
def test_example_end_to_end(tmp_path_factory, example, pipeline, metric):
    folder = example_project(tmp_path_factory, example)
    result = tfxd("run", f"{example}.yaml", *EXAMPLE_ARGS, cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = summaries(folder, pipeline)
    assert set(statuses(summary).values()) == {"ran"}
    assert summary["metrics"][metric] >= 0.9, summary["metrics"]
    assert summary["blessed"] is True and summary["pushed_to"]
