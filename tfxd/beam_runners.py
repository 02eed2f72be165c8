"""Beam's portable Flink and Spark runners, with each file read spread over the engine's workers.

Beam's Python SDK reads files (ReadFromTFRecord, so every TFXIO read in TFX's components) through a
splittable DoFn behind one Impulse element. Beam's Flink and Spark job servers fuse the split and the read
into the stage that holds that one element, so one Spark task or Flink subtask reads and processes all the
input while the others idle (Spark's event log of StatisticsGen and Transform: in every heavy stage one
task ran 15-20 s and the other under 0.1 s). The Python SDK can expand splittable DoFns itself and put a
Reshuffle, which both engines run natively, between the split and the read: its `pre_optimize`
experiment with the `expand_sdf` phase. A user cannot ask for that with flags in Beam 2.74, so these
runners do what the flags would:
- Beam splits `--experiments` values at commas, and the phase list is comma-separated: the runners set
  the experiment on the options, where the portable runner reads it, unless the pipeline set its own;
- the expansion keeps the splittable ParDo, with its ParDo URN and payload, as the parent of its parts, and
  the job server expands that ParDo a second time and drops the SDK's parts (its PipelineValidator:
  "references unknown subtransform"): the runners leave such a parent a plain composite.

`beam.runner: flink | spark` submit through these (tfxd.beam_engines.ENGINES); Beam finds them by their
dotted name, in the process that runs the component, here or in the pipeline's image.
"""

from __future__ import annotations

from typing import Any

from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability import flink_runner, portable_runner, spark_runner

# Beam's default phases (pack_combiners, lift_combiners) and expand_sdf; Beam appends sort_stages itself.
PRE_OPTIMIZE = "pre_optimize=pack_combiners,lift_combiners,expand_sdf"


def spread_reads(options: PipelineOptions) -> None:
    """Ask Beam's portable runner to expand splittable DoFns, unless the pipeline chose its own phases."""
    debug = options.view_as(DebugOptions)
    if debug.lookup_experiment("pre_optimize") is None:  # type: ignore[no-untyped-call]  # Beam's, unannotated
        debug.add_experiment(PRE_OPTIMIZE)  # type: ignore[no-untyped-call]


def optimized(proto: beam_runner_api_pb2.Pipeline, options: PipelineOptions) -> beam_runner_api_pb2.Pipeline:
    """Beam's optimization of ``proto``, with the expanded ParDos left composites for the job server."""
    result = portable_runner.PortableRunner._optimize_pipeline(proto, options)
    for transform in result.components.transforms.values():
        if transform.subtransforms and transform.spec.urn == common_urns.primitives.PAR_DO.urn:
            transform.ClearField("spec")
    return result


class _ReadsSpread:
    def run_portable_pipeline(self, pipeline: Any, options: PipelineOptions) -> Any:
        spread_reads(options)
        return super().run_portable_pipeline(pipeline, options)  # type: ignore[misc]  # the runner's, mixed in

    _optimize_pipeline = staticmethod(optimized)


class FlinkRunner(_ReadsSpread, flink_runner.FlinkRunner):
    """Beam's FlinkRunner, reads spread (the module's docstring)."""


class SparkRunner(_ReadsSpread, spark_runner.SparkRunner):
    """Beam's SparkRunner, reads spread (the module's docstring)."""
