"""StatisticsGen executor: TFX's own, its examples read a gzipped file at a time (tfxd.example_files).

TFX's executor reads each split through TFXIO's Beam source, one record per Beam element, before TFDV
computes the statistics a batch at a time: a per-record cost in front of per-batch work (bench/RESULTS.md
has what it was). The statistics are TFDV's, computed by the same code from the same rows, handed to the
same workers in the same order (tests/components/statistics_gen/test_executor.py)."""

from __future__ import annotations

from tfx.components.statistics_gen import executor as tfx_statistics_gen

from tfxd import example_files, files
from tfxd.direct_runner import BeamMendedExecutor


class Executor(BeamMendedExecutor, files.PipelineTempRemovedExecutor, tfx_statistics_gen.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's files
        with example_files.batched_reads():
            super().Do(input_dict, output_dict, exec_properties)
