"""Beam's portable Flink and Spark runners, with the pipeline optimized by the Python SDK: fused as Beam's
own Python runner fuses it, and each file read spread over the engine's workers.

Two costs of Beam's Flink and Spark job servers optimizing a Python pipeline themselves
(GreedyPipelineFuser, runners/core-construction-java), both fixed by Beam's portable runner's own
`pre_optimize=all` experiment, whose phases (translations.standard_optimize_phases) are the ones Beam's
Python runner runs; the job servers take a pipeline the SDK fused as it is (FlinkPipelineRunner and
SparkPipelineRunner: "anyMatch(... ExecutableStage.URN ...) ? trimmedPipeline : GreedyPipelineFuser.fuse").
- Reads on one worker. Beam's Python SDK reads files (ReadFromTFRecord, so every TFXIO read in TFX's
  components) through a splittable DoFn behind one Impulse element, and the job servers fuse the split and
  the read into the stage that holds that one element: one Spark task or Flink subtask reads and processes
  all the input while the others idle (as Spark's event log of StatisticsGen and Transform showed, in
  every heavy stage). The SDK's `expand_sdf` phase puts a Reshuffle,
  which both engines run natively, between the split and the read.
- A stage break at every ParDo with side inputs. The Java fuser never fuses one into its producer's stage
  ("we break fusion to simplify this inspection", GreedyPCollectionFusers.canFuseParDo): tf.Transform's
  Transform step and others read side inputs, so every record batch went from Python to the JVM and back
  twice more (Transform's transform phase: read+decode, transform, encode+write as three stages, where
  the SDK's fusion makes one). The SDK's fuser breaks fusion only where a side input
  depends on the stage itself.

The runners set the experiment on the options unless the pipeline set its own `pre_optimize`. A
pipeline's own partial list with `expand_sdf` (`all_except_fusion`) keeps the splittable ParDo, with its
ParDo URN and payload, as the parent of its parts, and the job server expands that ParDo a second time and
drops the SDK's parts (its PipelineValidator: "references unknown subtransform"): the runners leave such a
parent a plain composite.

`beam.runner: flink | spark` submit through these (tfxd.beam_engines.ENGINES); Beam finds them by their
dotted name, in the process that runs the component, here or in the pipeline's image.
"""

from __future__ import annotations

from typing import Any

from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability import flink_runner, portable_runner, spark_runner

PRE_OPTIMIZE = "pre_optimize=all"  # Beam's standard phases: fusion, expand_sdf, combiner lifting and packing


def optimize_in_the_sdk(options: PipelineOptions) -> None:
    """Ask Beam's portable runner for its full optimization, unless the pipeline chose its own phases."""
    debug = options.view_as(DebugOptions)
    if debug.lookup_experiment("pre_optimize") is None:  # type: ignore[no-untyped-call]  # Beam's, unannotated
        debug.add_experiment(PRE_OPTIMIZE)  # type: ignore[no-untyped-call]


def optimized(proto: beam_runner_api_pb2.Pipeline, options: PipelineOptions) -> beam_runner_api_pb2.Pipeline:
    """Beam's optimization of ``proto``, expanded ParDos left composites for the job server (where a
    pipeline's own phases leave them)."""
    result = portable_runner.PortableRunner._optimize_pipeline(proto, options)
    for transform in result.components.transforms.values():
        if transform.subtransforms and transform.spec.urn == common_urns.primitives.PAR_DO.urn:
            transform.ClearField("spec")
    return result


class _OptimizedInTheSdk:
    def run_portable_pipeline(self, pipeline: Any, options: PipelineOptions) -> Any:
        optimize_in_the_sdk(options)
        return super().run_portable_pipeline(pipeline, options)  # type: ignore[misc]  # the runner's, mixed in

    _optimize_pipeline = staticmethod(optimized)


class FlinkRunner(_OptimizedInTheSdk, flink_runner.FlinkRunner):
    """Beam's FlinkRunner, the pipeline optimized by the SDK (the module's docstring)."""


class SparkRunner(_OptimizedInTheSdk, spark_runner.SparkRunner):
    """Beam's SparkRunner, the pipeline optimized by the SDK (the module's docstring)."""
