"""tfxd.files.PipelineTempRemoved: a Beam pipeline's local temporary folder goes when the with-block
fails while building the graph; a bare Beam pipeline leaves it (apache_beam/pipeline.py removes it in
run() only), which is what the wrapper is for."""

from __future__ import annotations

import os

import apache_beam as beam
import pytest

from tfxd.direct_runner import direct_args
from tfxd.files import PipelineTempRemoved


def _fails_while_building(pipeline) -> str:
    with pytest.raises(ValueError, match="a bad header"), pipeline as p:
        _ = p | beam.Create([1, 2])
        raise ValueError("a bad header")
    return pipeline.local_tempdir if isinstance(pipeline, beam.Pipeline) else pipeline.pipeline.local_tempdir


def test_a_bare_pipeline_that_fails_while_building_leaves_its_folder():
    folder = _fails_while_building(beam.Pipeline(argv=direct_args("in_memory", 1)))
    assert os.path.isdir(folder)
    os.rmdir(folder)


def test_the_wrapped_pipeline_removes_it_on_failure_and_on_success():
    folder = _fails_while_building(PipelineTempRemoved(beam.Pipeline(argv=direct_args("in_memory", 1))))
    assert not os.path.exists(folder)
    wrapped = PipelineTempRemoved(beam.Pipeline(argv=direct_args("in_memory", 1)))
    with wrapped as p:
        counted = p | beam.Create([1, 2, 3]) | beam.combiners.Count.Globally()
    assert counted is not None and not os.path.exists(wrapped.pipeline.local_tempdir)


@pytest.mark.parametrize("module", ["example_gen", "transform", "evaluator"])
def test_tfxds_beam_executors_make_pipelines_that_remove_their_folder(module, tmp_path):
    """Each Beam executor of tfxd's (PipelineTempRemovedExecutor first in its bases) hands TFX's own
    pipeline, made from its Beam arguments, wrapped."""
    import importlib

    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor

    executor_class = importlib.import_module(f"tfxd.components.{module}.executor").Executor
    context = BaseBeamExecutor.Context(beam_pipeline_args=direct_args("in_memory", 1), tmp_dir=str(tmp_path),
                                       unique_id="test")
    wrapped = executor_class(context)._make_beam_pipeline()
    assert isinstance(wrapped, PipelineTempRemoved) and isinstance(wrapped.pipeline, beam.Pipeline)
    assert not os.path.exists(_fails_while_building(wrapped))


def test_a_bucket_roots_local_state_is_under_the_state_home(monkeypatch, tmp_path):
    from tfxd.files import join, local_state

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert local_state("gs://b/runs/taxi") == str(tmp_path / "tfxd" / "gs" / "b" / "runs" / "taxi")
    assert local_state("s3://b/../x/") == str(tmp_path / "tfxd" / "s3" / "b" / "x")
    assert local_state("/data/runs") == "/data/runs"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert local_state("gs://b/r") == str(tmp_path / "home" / ".local" / "state" / "tfxd" / "gs" / "b" / "r")
    assert join("gs://b/runs/", "runs", "1", "summary.json") == "gs://b/runs/runs/1/summary.json"
    assert join("/data/runs", "runs", "1") == "/data/runs/runs/1"
