"""What a run does to Beam: function signatures read once (signatures_remembered), with what Beam reads from
them unchanged (apache_beam/transforms/userstate.py get_dofn_specs and runners/common.py MethodWrapper are the
readers compared here); views of a pipeline's options made once (option_views_remembered), reading and writing
the options as Beam's own views do (apache_beam/options/pipeline_options.py, PipelineOptions.view_as); each
of tfxd's Beam executors runs with them, wherever it runs (BeamMendedExecutor)."""

from __future__ import annotations

import bz2
import functools
import inspect
from unittest import mock

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    StandardOptions,
    TypeOptions,
)
from apache_beam.runners.common import MethodWrapper
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, userstate

from tfxd.direct_runner import (
    SAMPLER_PERIOD_MS,
    BeamMendedExecutor,
    compressions_remembered,
    direct_args,
    dofn_specs_remembered,
    option_views_remembered,
    parallel_workers,
    sampler_wakes_often,
    signatures_remembered,
)

COUNT = userstate.ReadModifyWriteStateSpec("count", VarIntCoder())
EXPIRY = userstate.TimerSpec("expiry", userstate.TimeDomain.WATERMARK)
COUNT_STATE, EXPIRY_TIMER = beam.DoFn.StateParam(COUNT), beam.DoFn.TimerParam(EXPIRY)  # as Beam's examples write them


class Counting(beam.DoFn):
    """A stateful DoFn with a timer: state and timer parameters in its methods' defaults."""

    def process(self, element, count=COUNT_STATE, expiry=EXPIRY_TIMER):
        seen = (count.read() or 0) + 1
        count.write(seen)
        yield element[0], seen

    @userstate.on_timer(EXPIRY)
    def expired(self, count=COUNT_STATE):
        count.clear()


class Plain(beam.DoFn):
    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        yield element


def _dofns() -> list[beam.DoFn]:
    return [Counting(), Plain(), beam.Map(lambda x, w=beam.DoFn.WindowParam: (x, w)).fn, beam.Map(len).fn,
            beam.Map(functools.partial(divmod, 7)).fn, beam.FlatMap(lambda x: [x]).fn]


def _read(dofn: beam.DoFn) -> tuple:
    MethodWrapper(dofn, "process")  # builds as a stage's DoFn runner builds it
    return userstate.get_dofn_specs(dofn), core.get_function_arguments(dofn, "process")


def test_beam_reads_the_same_state_timers_and_parameters_with_signatures_remembered():
    expected = [_read(dofn) for dofn in _dofns()]
    with signatures_remembered():
        assert [_read(dofn) for dofn in _dofns()] == expected
        assert [_read(dofn) for dofn in _dofns()] == expected  # answered from what was remembered
    assert expected[0][0] == ({COUNT}, {EXPIRY})  # the comparison sees specs and parameters
    assert expected[1][1] == (["element", "timestamp"], [beam.DoFn.TimestampParam])
    assert core.get_function_args_defaults.__name__ == "get_function_args_defaults"  # Beam's own again


def test_a_dofn_made_again_asks_for_no_signature_and_another_function_is_asked_afresh():
    real = inspect.signature
    with mock.patch.object(inspect, "signature", side_effect=real) as asked:
        userstate.get_dofn_specs(Counting())
        plain = asked.call_count
        assert plain > 10  # every method of the DoFn, each time Beam asks
        with signatures_remembered():
            userstate.get_dofn_specs(Counting())
            first = asked.call_count - plain
            userstate.get_dofn_specs(Counting())  # as each stage builds its DoFns afresh
            assert asked.call_count - plain == first
            # a function of its own (two lambdas alike but for a default) is read for itself
            one = core.get_function_arguments(beam.Map(lambda x, t=beam.DoFn.TimestampParam: x).fn, "process")
            other = core.get_function_arguments(beam.Map(lambda x, w=beam.DoFn.WindowParam: x).fn, "process")
            assert one == (["x", "t"], [beam.DoFn.TimestampParam])
            assert other == (["x", "w"], [beam.DoFn.WindowParam])
        userstate.get_dofn_specs(Counting())
        assert asked.call_count - plain - first > 10  # outside, Beam asks again


def test_a_stateful_pipeline_gives_the_same_results_on_the_in_process_runner():
    def run() -> None:
        options = beam.options.pipeline_options.PipelineOptions(direct_args("in_memory", 1))
        with beam.Pipeline(options=options) as pipeline:
            counted = (pipeline | beam.Create([("a", 1), ("b", 2), ("a", 3)]) | beam.ParDo(Counting())
                       | beam.Map(lambda kv, w=beam.DoFn.WindowParam: (kv[0], kv[1], str(w)[:6])))
            assert_that(counted, equal_to([("a", 1, "Global"), ("a", 2, "Global"), ("b", 1, "Global")]))

    run()
    with signatures_remembered():
        run()
    with dofn_specs_remembered():
        run()


def _views(options: PipelineOptions) -> dict:
    return {cls.__name__: {name: getattr(options.view_as(cls), name) for name in options.view_as(cls)._visible_option_list()}
            for cls in (StandardOptions, DirectOptions, TypeOptions)}


def test_option_views_are_made_once_and_read_and_write_the_options_as_beams_own():
    args = [*direct_args("multi_processing", 3), "--no_pipeline_type_check"]
    expected = _views(PipelineOptions(args))
    with mock.patch.object(PipelineOptions, "_visible_option_list", autospec=True,
                           side_effect=PipelineOptions._visible_option_list) as parsed:
        with option_views_remembered():
            options = PipelineOptions(args)
            assert _views(options) == expected
            made = parsed.call_count
            first = options.view_as(TypeOptions)
            assert options.view_as(TypeOptions) is first and parsed.call_count == made  # remembered, not parsed
            first.pipeline_type_check = True  # a view writes the options' values...
            assert options.view_as(TypeOptions).pipeline_type_check is True
            options.view_as(DirectOptions).direct_num_workers = 5  # ...which every view reads
            assert options.view_as(DirectOptions).direct_num_workers == 5
            assert options.get_all_options()["direct_num_workers"] == 5
            other = PipelineOptions(direct_args("in_memory", 1))  # another pipeline's options: their own views
            assert other.view_as(DirectOptions).direct_num_workers == 1
            assert other.view_as(DirectOptions) is not options.view_as(DirectOptions)
        outside = PipelineOptions(args)
        assert outside.view_as(TypeOptions) is not outside.view_as(TypeOptions)  # Beam's own again
    assert expected["TypeOptions"]["pipeline_type_check"] is False  # the comparison sees the arguments
    assert expected["DirectOptions"]["direct_num_workers"] == 3


def test_a_pipeline_built_and_run_with_option_views_remembered_gives_the_same_results():
    def run() -> None:
        with beam.Pipeline(options=PipelineOptions(direct_args("in_memory", 1))) as pipeline:
            counted = (pipeline | beam.Create([("a", 1), ("b", 2), ("a", 3)]) | beam.CombinePerKey(sum)
                       | beam.MapTuple(lambda key, total: f"{key}={total}"))
            assert_that(counted, equal_to(["a=4", "b=2"]))

    with option_views_remembered():
        run()


@pytest.mark.parametrize(("args", "processes"), [
    (direct_args("multi_processing", 3), 3),
    (direct_args("in_memory", 1), 1),
    ([*direct_args("multi_processing", 3), "--direct_running_mode=multi_threading"], 3),  # threads, the last flag
    (["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=0"], None),
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--direct_num_workers=4"], 1),
    ([], 1),
])
def test_parallel_workers_are_the_direct_runners_own(args, processes):
    import os

    assert parallel_workers(args) == (processes or os.cpu_count())


class _Recorded:
    """Stands for TFX's executor under the mixin: what Beam's mended attributes were while its Do ran."""

    def __init__(self, args: list[str]) -> None:
        self._beam_pipeline_args = args

    def Do(self, input_dict, output_dict, exec_properties):  # noqa: N802 - TFX's name
        from apache_beam.internal import cloudpickle_pickler
        from apache_beam.runners.portability.fn_api_runner import worker_handlers
        from apache_beam.runners.worker import statesampler

        self.seen = (core.get_function_args_defaults, PipelineOptions.view_as, worker_handlers.STATE_CACHE_SIZE_MB,
                     statesampler.StateSampler.__init__, cloudpickle_pickler.bz2, userstate.get_dofn_specs)
        return "done"


class _Mended(BeamMendedExecutor, _Recorded):
    pass


@pytest.mark.parametrize(("mode", "cache_off"), [("in_memory", True), ("multi_processing", False)])
def test_an_executor_runs_with_beam_mended_and_puts_it_back(mode, cache_off):
    from apache_beam.internal import cloudpickle_pickler
    from apache_beam.runners.portability.fn_api_runner import worker_handlers
    from apache_beam.runners.worker import statesampler

    def mended() -> tuple:
        return (core.get_function_args_defaults, PipelineOptions.view_as, worker_handlers.STATE_CACHE_SIZE_MB,
                statesampler.StateSampler.__init__, cloudpickle_pickler.bz2, userstate.get_dofn_specs)

    before = mended()
    executor = _Mended(direct_args(mode, 1))
    assert executor.Do({}, {}, {}) == "done"
    signatures, views, cache, sampler, compression, specs = executor.seen
    assert signatures is not before[0] and views is not before[1] and sampler is not before[3]
    assert compression is not before[4] and before[4] is bz2 and specs is not before[5]
    assert (cache == 0) is cache_off and before[2] > 0
    assert mended() == before


@pytest.mark.parametrize("module", ["example_gen", "statistics_gen", "transform", "evaluator"])
def test_each_of_tfxds_beam_executors_mends_beam_before_tfxs_executor_runs(module):
    import importlib

    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor

    order = importlib.import_module(f"tfxd.components.{module}.executor").Executor.__mro__
    assert order.index(BeamMendedExecutor) < order.index(BaseBeamExecutor)


def _sampler_periods(pipeline_args: list[str]) -> list[int]:
    """The sampling periods of the state samplers Beam's own bundle processors made for a real pipeline
    (apache_beam/runners/worker/bundle_processor.py, BundleProcessor.__init__) run on the in-process runner,
    its results checked."""
    from apache_beam.runners.worker import statesampler

    made: list[int] = []
    original = statesampler.StateSampler.__init__

    def recorded(sampler, *args, **kwargs):
        original(sampler, *args, **kwargs)
        made.append(sampler.sampling_period_ms)

    with mock.patch.object(statesampler.StateSampler, "__init__", recorded), beam.Pipeline(
            options=PipelineOptions(pipeline_args)) as pipeline:
        assert_that(pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2) | beam.CombineGlobally(sum),
                    equal_to([12]))
    return made


def test_bundles_on_the_in_process_runner_sample_their_state_every_few_milliseconds():
    """Beam's default (200 ms, statesampler.DEFAULT_SAMPLING_PERIOD_MS) outside the block; SAMPLER_PERIOD_MS
    in it, for every bundle processor Beam makes, with the pipeline's results unchanged; Beam's back after."""
    from apache_beam.runners.worker import statesampler

    args = direct_args("in_memory", 1)
    before = statesampler.StateSampler.__init__
    assert set(_sampler_periods(args)) == {statesampler.DEFAULT_SAMPLING_PERIOD_MS}
    with sampler_wakes_often():
        periods = _sampler_periods(args)
    assert periods and set(periods) == {SAMPLER_PERIOD_MS} and SAMPLER_PERIOD_MS < 200
    assert statesampler.StateSampler.__init__ is before
    assert set(_sampler_periods(args)) == {statesampler.DEFAULT_SAMPLING_PERIOD_MS}


def test_a_sampler_that_wakes_often_still_counts_each_transforms_milliseconds():
    """Beam's own accounting reads the samples: time a bundle spends in one transform is counted to that
    transform's process state (Beam's ScopedState nsecs, what its monitoring infos report), never more
    than the time it was in it."""
    import time

    from apache_beam.runners.worker import statesampler
    from apache_beam.utils.counters import CounterFactory

    with sampler_wakes_often():
        sampler = statesampler.StateSampler("stage", CounterFactory())
    state = sampler.scoped_state("step", "process")
    began = time.monotonic()  # before the sampling thread starts: it counts from its own start
    sampler.start()
    with state:
        time.sleep(0.05)
    sampler.stop()
    spent = time.monotonic() - began
    assert sampler.sampling_period_ms == SAMPLER_PERIOD_MS
    assert 0 < state.sampled_seconds() <= spent


def test_beams_pickler_gives_the_same_payloads_compressing_each_once(monkeypatch):
    """The judge is Beam's own pickler (apache_beam/internal/pickler.py, dumps and loads): the same bytes as
    without the block, loaded back the same, and bz2 itself asked once per payload in the block (the bite:
    twice outside it)."""
    from apache_beam.internal import pickler

    fn = beam.Map(lambda x, offset=3: x + offset).fn
    plain = pickler.dumps(fn)
    asked: list[str] = []
    compress, decompress = bz2.compress, bz2.decompress
    monkeypatch.setattr(bz2, "compress", lambda *a, **k: asked.append("compress") or compress(*a, **k))
    monkeypatch.setattr(bz2, "decompress", lambda *a, **k: asked.append("decompress") or decompress(*a, **k))
    pickler.loads(pickler.dumps(fn)), pickler.loads(pickler.dumps(fn))
    assert asked == ["compress", "decompress"] * 2
    asked.clear()
    with compressions_remembered():
        first, second = pickler.dumps(fn), pickler.dumps(fn)
        loaded = [pickler.loads(first), pickler.loads(second)]
    assert first == second == plain
    assert asked == ["compress", "decompress"]
    assert [one.process(4) for one in loaded] == [[7], [7]] and loaded[0] is not loaded[1]


def test_a_pipeline_run_with_compressions_remembered_gives_the_same_results():
    with compressions_remembered(), beam.Pipeline(options=PipelineOptions(direct_args("in_memory", 1))) as pipeline:
        doubled = pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * 2)
        assert_that(doubled | beam.CombineGlobally(sum), equal_to([12]), label="sum")
        assert_that(doubled | "again" >> beam.Map(lambda x: x * 2), equal_to([4, 8, 12]), label="twice")


def test_a_dofns_specs_are_beams_own_read_once_while_it_is_the_same(monkeypatch):
    """The judge is Beam's own userstate.get_dofn_specs: the same specs for every DoFn, Beam asked once per
    DoFn while it is the same (the bite: every time outside the block), and again for a DoFn given another
    attribute (a method with state and timer parameters: Beam reads every method a DoFn has) or another DoFn
    of the same class."""
    dofns, plain = _dofns(), Plain()  # made first: making a ParDo asks too
    asked: list[object] = []
    beams = userstate.get_dofn_specs
    monkeypatch.setattr(userstate, "get_dofn_specs", lambda dofn: asked.append(dofn) or beams(dofn))
    expected = [beams(dofn) for dofn in dofns]
    assert [userstate.get_dofn_specs(dofn) for dofn in dofns * 2] == expected * 2 and len(asked) == 12
    asked.clear()
    with dofn_specs_remembered():
        assert [userstate.get_dofn_specs(dofn) for dofn in dofns * 3] == expected * 3
        assert asked == dofns
        assert userstate.is_stateful_dofn(dofns[0]) and not userstate.is_stateful_dofn(dofns[1])
        assert len(asked) == len(dofns)  # Beam's is_stateful_dofn reads them through the patch
        assert userstate.get_dofn_specs(plain) == (set(), set())
        plain.extra = Counting().process
        assert userstate.get_dofn_specs(plain) == beams(plain) == ({COUNT}, {EXPIRY})
        assert userstate.get_dofn_specs(Counting()) == ({COUNT}, {EXPIRY})
        assert len(asked) == len(dofns) + 3 and asked[-3:-1] == [plain, plain]
        specs = userstate.get_dofn_specs(dofns[0])
        specs[0].clear()  # a caller's own sets: what is remembered stays whole
        assert userstate.get_dofn_specs(dofns[0]) == expected[0]


def test_remembered_payloads_stay_within_their_bytes():
    """What compressions_remembered holds is bounded by bytes: the payloads used last kept within the limit,
    one larger than a tenth of it never kept (asked again, worked again)."""
    from tfxd.direct_runner import _Remembered

    worked: list[bytes] = []
    memo = _Remembered(lambda data: worked.append(data) or data[::-1], limit=100)
    payloads = [bytes([i]) * 4 + b"." for i in range(12)]  # 10 bytes held each, asked and answered
    assert [memo(data) for data in payloads[:8]] == [data[::-1] for data in payloads[:8]] and memo.held == 80
    assert [memo(data) for data in payloads[:8]] and len(worked) == 8  # all 8 answered from memory
    memo(payloads[0])  # used last: kept when the next ones push the oldest out
    for data in payloads[8:]:
        memo(data)
    assert memo.held == 100 and len(worked) == 12  # the two used longest ago pushed out
    worked.clear()
    memo(payloads[0]), memo(payloads[11])
    assert worked == []
    memo(payloads[1])
    assert worked == [payloads[1]]  # pushed out
    large = b"x" * 6  # 12 bytes, but a tenth of a limit of 100 is 10
    worked.clear()
    small_memo = _Remembered(lambda data: worked.append(data) or data, limit=100)
    small_memo(large), small_memo(large)
    assert worked == [large, large] and small_memo.held == 0
