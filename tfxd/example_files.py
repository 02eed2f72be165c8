"""Input examples read a file at a time and decoded a batch at a time (tfxd.tfrecords), in place of TFX's
read through TFXIO's Beam source: for Transform, StatisticsGen and the Evaluator, TFX's components that
read every example (batched_reads, around their executors' Do).

TFX reads examples through tfx_bsl's TFExampleRecord.BeamSource: Beam's TFRecord source yields one record
at a time, tfx_bsl counts each for its telemetry, Beam's BatchElements gathers them into lists of at most
1,000, and tfx_bsl decodes each list into an Arrow RecordBatch. Here each gzipped file (ExampleGen writes
its examples as such) is read as one element: its records are unframed a block at a time, every CRC
checked, and handed on in lists of the same size to the same decoder (tfx_bsl's _DecodeBatchExamplesDoFn),
raw-record column and projection included: no record is an element of its own, counted or batched on its
own (bench/RESULTS.md has what it saved).

The RecordBatches hold the same rows; only the cut between batches differs, as Beam's adaptive batches
differ between runs too. Which rows each worker gets, and in which order, is kept as it was: tf.Transform's
quantiles (bucketize) and TFDV's (histograms) are approximate and their sketches depend on it, not on the
cut. Beam's source hands the files it matched, in the order it matched them, to the workers in turn; so
does Beam's in-process runner here (keyed by their index; Create's own reshuffle would spread them at
random, other boundaries each run). Flink and Spark hand them out in turn as they redistribute for Beam's
reshuffle (_InTurn), from a starting subtask of their choosing: grouped by the index, Flink hashed the few
keys to its subtasks unevenly, one worker reading most of the examples while the other idled
(bench/RESULTS.md). tfx_bsl's telemetry counters (Beam metrics no tfxd figure reads) are not kept. A
pattern with files that are not gzipped, or that matches none, keeps TFX's source.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from tfx_bsl.tfxio import tf_example_record

from tfxd import patches, tfrecords

BATCH_SIZE = 1000  # tfx_bsl's BatchRecords lets Beam's BatchElements grow its batches up to 1,000 records
SUFFIX = ".gz"
Source = beam.PTransform[Any, Any]  # TFXIO's BeamSource: the pipeline -> RecordBatches


class _RecordLists(beam.DoFn):
    """A gzipped TFRecord file -> its records in lists of ``batch_size`` (the last one shorter)."""

    def __init__(self, batch_size: int) -> None:
        self._batch_size = batch_size

    def process(self, indexed: tuple[int, str]) -> Iterator[list[bytes]]:
        path = indexed[1]
        gathered: list[bytes] = []
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            try:
                for records in tfrecords.gzipped_records(stream):
                    gathered.extend(records)
                    whole = len(gathered) - len(gathered) % self._batch_size
                    for start in range(0, whole, self._batch_size):
                        yield gathered[start:start + self._batch_size]
                    gathered = gathered[whole:]
            except tfrecords.DamagedRecordError as error:
                raise tfrecords.DamagedRecordError(f"{path}: {error}") from None
        if gathered:
            yield gathered


class _InTurn(beam.Reshuffle):
    """(index, path) pairs to the workers in turn. Beam's portable job servers run any transform with
    Beam's reshuffle URN (this class's, as Beam's Reshuffle) as their own redistribution, round robin:
    Flink's DataSet.rebalance, Spark's repartition (their portable batch translators' translateReshuffle,
    Beam 2.62). Beam's in-process runner knows no such URN and runs the expansion here: a GroupByKey on
    the index, so the workers get the files as Beam's source hands them out (the module's docstring)."""

    def expand(self, pairs: Any) -> Any:
        by_index = beam.GroupByKey()  # type: ignore[no-untyped-call]  # Beam's transforms are unannotated
        ungroup = beam.FlatMap(lambda grouped: ((grouped[0], path) for path in grouped[1]))  # type: ignore[no-untyped-call]
        return pairs | "ByIndex" >> by_index | "Ungroup" >> ungroup


def _gzipped_files(patterns: list[str]) -> list[str] | None:
    """Every file the patterns match, or None where one pattern matches nothing or a file is not gzipped."""
    matched = []
    for result in FileSystems.match(patterns):  # type: ignore[no-untyped-call]  # Beam's, unannotated
        paths = [metadata.path for metadata in result.metadata_list]  # in the order Beam's sources take them
        if not paths or not all(path.endswith(SUFFIX) for path in paths):
            return None
        matched.extend(paths)
    return matched


def beam_source(tfx_source: Callable[..., Source]) -> Callable[..., Source]:
    """TFExampleRecord.BeamSource reading here; ``tfx_source`` is tfx_bsl's own, kept for other files."""

    def source(tfxio: Any, batch_size: int | None = None) -> Source:
        paths = _gzipped_files(list(tfxio._file_pattern))
        if paths is None:
            return tfx_source(tfxio, batch_size)

        @beam.ptransform_fn
        @beam.typehints.with_input_types(Any)
        @beam.typehints.with_output_types(pa.RecordBatch)
        def read(pipeline: Any) -> Any:
            # the files to the workers by their index, as Beam's source hands them out (see the docstring);
            # Beam's transforms are unannotated
            files = beam.Create(list(enumerate(paths)), reshuffle=False)  # type: ignore[no-untyped-call]
            spread = _InTurn()  # type: ignore[no-untyped-call]  # Beam's Reshuffle.__init__ is unannotated
            lists = beam.ParDo(_RecordLists(batch_size or BATCH_SIZE))  # type: ignore[no-untyped-call]
            decode = beam.ParDo(tf_example_record._DecodeBatchExamplesDoFn(  # type: ignore[no-untyped-call]
                tfxio._GetSchemaForDecoding(), tfxio.raw_record_column_name))
            return (pipeline | "Files" >> files | "Spread" >> spread | "ReadRecordLists" >> lists
                    | "Decode" >> decode)

        return read()

    return source


@contextlib.contextmanager
def batched_reads() -> Iterator[None]:
    """For a block (an executor's Do): TFExampleRecord's Beam source reads here, then TFX's again (patch
    tfx_bsl.batched_reads)."""
    with patches.applied("tfx_bsl.batched_reads", beam_source(tf_example_record.TFExampleRecord.BeamSource)):
        yield
