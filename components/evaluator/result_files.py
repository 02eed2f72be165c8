"""TFMA's result files (metrics, plots, attributions, validations, eval_config.json) each written by one
small transform, in place of Beam's sharded file writes.

TFMA writes each result with Beam's WriteToTFRecord or WriteToText (tensorflow_model_analysis/writers:
metrics_plots_and_validations_writer.py, eval_config_writer.py), each a sharded write of about six stages
(an impulse, temporary files per bundle, a grouping, a pre-finalize and a finalize with side inputs): five
writes were ~30 of the taxi Evaluator's 35 Beam stages, each some 10 ms on the in-process runner, for a
few records (one per slice). Here a result is one file written from a side input in one stage after the
records are encoded: the same records in the same order, framed as TFRecords (tfxd.tfrecords) or as text
lines, in the file Beam names a single shard (``-00000-of-00001`` before the suffix, or no shard part
where TFMA asks for none), written also when there are no records, as Beam writes an empty shard. TFMA's
readers (load_eval_result, its load_and_deserialize_* functions) read them as they read Beam's.

Only the writes TFMA makes are taken: another shape of call (a shard count, a compression, another
template) is Beam's own write.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from tfxd import tfrecords

ONE_SHARD = "-00000-of-00001"  # what Beam's default template (-SSSSS-of-NNNNN) names a single shard
# (Beam's write, the keyword arguments TFMA's writers pass it)
TAKEN = {"WriteToTFRecord": {"file_path_prefix", "shard_name_template", "file_name_suffix", "coder"},
         "WriteToText": {"file_path_prefix", "shard_name_template"}}


def file_name(file_path_prefix: str, shard_name_template: str | None, file_name_suffix: str) -> str:
    """The file Beam's write of one shard names."""
    return f"{file_path_prefix}{ONE_SHARD if shard_name_template is None else ''}{file_name_suffix}"


def _write(_: Any, path: str, encoded: Iterable[bytes], tfrecord: bool) -> str:
    records = list(encoded)
    with FileSystems.create(path) as handle:
        handle.write(tfrecords.frames(records) if tfrecord else b"".join(line + b"\n" for line in records))
    return path


class WriteResultFile(beam.PTransform):
    """A PCollection's records in one file (TFRecord frames, or text lines) -> a PCollection of its name."""

    def __init__(self, path: str, encode: Any, tfrecord: bool) -> None:
        super().__init__()
        self._path, self._encode, self._tfrecord = path, encode, tfrecord

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        encoded = records | "Encode" >> beam.Map(self._encode)
        return (records.pipeline | "Start" >> beam.Impulse()
                | "WriteFile" >> beam.Map(_write, self._path, beam.pvalue.AsIter(encoded), self._tfrecord))


def _to_tfrecord(beams_own: Any) -> Any:
    def write(file_path_prefix: str, *args: Any, **kwargs: Any) -> beam.PTransform:
        if args or set(kwargs) - TAKEN["WriteToTFRecord"] or kwargs.get("shard_name_template") not in (None, ""):
            return beams_own(file_path_prefix, *args, **kwargs)
        coder = kwargs.get("coder") or beam.coders.BytesCoder()
        path = file_name(file_path_prefix, kwargs.get("shard_name_template"), kwargs.get("file_name_suffix", ""))
        return WriteResultFile(path, coder.encode, tfrecord=True)

    return write


def _to_text(beams_own: Any) -> Any:
    def write(file_path_prefix: str, *args: Any, **kwargs: Any) -> beam.PTransform:
        if args or set(kwargs) - TAKEN["WriteToText"] or kwargs.get("shard_name_template") not in (None, ""):
            return beams_own(file_path_prefix, *args, **kwargs)
        path = file_name(file_path_prefix, kwargs.get("shard_name_template"), "")
        return WriteResultFile(path, lambda line: str(line).encode("utf-8"), tfrecord=False)

    return write


def beam_for_tfma() -> types.ModuleType:
    """Beam as TFMA's writer modules see it (their ``beam``, patch tfma.result_files): Beam itself, but for
    ``beam.io``'s WriteToTFRecord and WriteToText, which write TFMA's calls' results here."""
    io = types.ModuleType("apache_beam.io")
    io.__dict__.update(vars(beam.io))
    io.WriteToTFRecord = _to_tfrecord(beam.io.WriteToTFRecord)  # type: ignore[attr-defined]
    io.WriteToText = _to_text(beam.io.WriteToText)  # type: ignore[attr-defined]

    class BeamForTfma(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            return io if name == "io" else getattr(beam, name)

    return BeamForTfma("apache_beam")
