"""tfxd's Flink and Spark runners (tfxd/beam_runners.py): a file read is split over the engine's workers.

The judges are Beam's own: its portable runner's optimization (the proto it sends), its option parser (the
negative case: the flag a user would write is split at its commas), and a real embedded Flink and Spark,
where the records of two files must arrive in two bundles, one file each, instead of one bundle with both.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from unittest import mock

import pytest

from tfxd.beam_engines import ENGINES
from tfxd.pipeline.run import beam_engine

FILES, RECORDS = 2, 50  # gzipped: Beam cannot split one, so a file is one restriction


def _records(folder) -> str:
    """FILES gzipped TFRecord files of RECORDS records each, written by Beam's own TFRecord coder."""
    from apache_beam.io.tfrecordio import _TFRecordUtil

    for index in range(FILES):
        with gzip.open(os.path.join(folder, f"part-{index}.tfrecord.gz"), "wb") as out:
            for record in range(RECORDS):
                _TFRecordUtil.write_record(out, f"{index}-{record}".encode())
    return os.path.join(folder, "part-*.tfrecord.gz")


def _read(pipeline, pattern: str, bundles: str | None = None):
    import apache_beam as beam

    read = pipeline | beam.io.ReadFromTFRecord(pattern)
    if bundles is not None:
        _ = read | beam.ParDo(_bundle_counter(bundles))
    return read


def _bundle_counter(folder: str):
    """A DoFn writing each bundle's record count to a file of its own in ``folder`` (the SDK workers are
    processes here). Defined inside a function so that Beam pickles the class by value: the workers need
    not import the tests."""
    import uuid

    import apache_beam as beam

    class CountBundles(beam.DoFn):
        def start_bundle(self):
            self.count = 0

        def process(self, record):
            self.count += 1

        def finish_bundle(self):
            if self.count:
                with open(os.path.join(folder, uuid.uuid4().hex), "w") as out:
                    out.write(str(self.count))

    return CountBundles()


def _urns(proto) -> list[str]:
    return [t.spec.urn for t in proto.components.transforms.values()]


def _proto(args: list[str], tmp_path, runner=None):
    """The pipeline Beam's portable runner would send for a two-file read, with ``args`` as options."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.portable_runner import PortableRunner

    from tfxd import beam_runners

    options = PipelineOptions(["--environment_type=EXTERNAL", "--environment_config=localhost:1", *args])
    # a pipeline made and never run: Beam removes its folder and the environment's staging lists only
    # when it runs, so they go in a folder of their own
    with tempfile.TemporaryDirectory() as temp, mock.patch.object(tempfile, "tempdir", temp):
        pipeline = beam.Pipeline(options=options)
        _read(pipeline, _records(tmp_path))
        proto = pipeline.to_runner_api()
    if runner is None:
        return PortableRunner._optimize_pipeline(proto, options)
    beam_runners.spread_reads(options)
    return runner._optimize_pipeline(proto, options)


def test_the_read_is_split_then_reshuffled_then_read(tmp_path):
    from apache_beam.portability import common_urns

    from tfxd import beam_runners

    proto = _proto([], tmp_path, beam_runners.SparkRunner)
    urns = _urns(proto)
    sdf = common_urns.sdf_components
    assert urns.count(sdf.SPLIT_AND_SIZE_RESTRICTIONS.urn) == 1
    assert urns.count(common_urns.composites.RESHUFFLE.urn) == 1
    assert urns.count(sdf.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn) == 1
    reshuffle = next(t for t in proto.components.transforms.values()
                     if t.spec.urn == common_urns.composites.RESHUFFLE.urn)
    split = next(t for t in proto.components.transforms.values() if t.spec.urn == sdf.SPLIT_AND_SIZE_RESTRICTIONS.urn)
    process = next(t for t in proto.components.transforms.values()
                   if t.spec.urn == sdf.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn)
    assert list(reshuffle.inputs.values()) == list(split.outputs.values())
    assert list(reshuffle.outputs.values())[0] in process.inputs.values()
    # the job server would expand a ParDo parent a second time and drop these parts
    assert not [t.unique_name for t in proto.components.transforms.values()
                if t.subtransforms and t.spec.urn == common_urns.primitives.PAR_DO.urn]


def test_the_flag_a_user_would_write_does_not_do_it(tmp_path):
    """The negative case: Beam splits `--experiments` at commas, so the phase list never arrives whole."""
    from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions
    from apache_beam.portability import common_urns

    from tfxd.beam_runners import PRE_OPTIMIZE

    flag = f"--experiments={PRE_OPTIMIZE}"
    assert PipelineOptions([flag]).view_as(DebugOptions).experiments == [
        "pre_optimize=pack_combiners", "lift_combiners", "expand_sdf"]
    assert common_urns.composites.RESHUFFLE.urn not in _urns(_proto([flag], tmp_path))
    assert common_urns.composites.RESHUFFLE.urn not in _urns(_proto([], tmp_path))


def test_a_pipelines_own_phases_are_left_alone():
    from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions

    from tfxd.beam_runners import PRE_OPTIMIZE, spread_reads

    own = PipelineOptions(["--experiments=pre_optimize=none"])
    spread_reads(own)
    assert own.view_as(DebugOptions).experiments == ["pre_optimize=none"]
    none = PipelineOptions([])
    spread_reads(none)
    spread_reads(none)
    assert none.view_as(DebugOptions).experiments == [PRE_OPTIMIZE]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("engine", ["spark", "flink"])
def test_on_the_engine_each_file_is_read_in_a_bundle_of_its_own(engine, tmp_path):
    """Beam's own runner reads both files in one bundle (one task); tfxd's, one file a bundle, the same
    records in all."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.util import assert_that, equal_to

    from tests.pipeline.run.test_beam_engines import _ours

    pattern = _records(tmp_path)
    expected = [f"{index}-{record}".encode() for index in range(FILES) for record in range(RECORDS)]
    seen = {}
    with beam_engine.running(ENGINES[engine], None, 2, str(tmp_path / "logs")) as running:
        for runner in (ENGINES[engine].runner, f"apache_beam.runners.portability.{engine}_runner."
                                               f"{engine.title()}Runner"):
            bundles = tmp_path / f"bundles-{len(seen)}"  # what each bundle read, a file a bundle
            bundles.mkdir()
            options = PipelineOptions([f"--runner={runner}", f"--job_endpoint={running.job_endpoint}",
                                       "--environment_type=EXTERNAL", f"--environment_config={running.worker_pool}",
                                       "--parallelism=2", "--sdk_worker_parallelism=2"])
            with beam.Pipeline(options=options) as pipeline:
                assert_that(_read(pipeline, pattern, str(bundles)), equal_to(expected))
            seen[runner] = sorted(int(path.read_text()) for path in bundles.iterdir())
    ours, beams = seen.values()
    assert ours == [RECORDS] * FILES, seen
    assert beams == [RECORDS * FILES], seen
    assert _ours() == []
