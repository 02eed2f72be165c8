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
