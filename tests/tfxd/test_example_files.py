"""Input examples read a gzipped file at a time (example_files, as Transform and StatisticsGen read
them) are what TFXIO's own Beam source (tfx_bsl's TFExampleRecord.BeamSource, as shipped) gives for the
same files: the same rows, decoded by the same decoder, with the raw-record column and projection TFX's
Transform asks for; batches of the size asked for; a damaged file refused with its name; files that are
not gzipped left to TFX's source."""

from __future__ import annotations

import gzip
import os
import pickle
import uuid

import apache_beam as beam
import pytest
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.tfxio import tf_example_record

from tfxd import example_files, tfrecords
from tfxd.direct_runner import direct_args

TFX_SOURCE = tf_example_record.TFExampleRecord.BeamSource
RAW = "raw_record"


def _schema() -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    for name, kind in (("fare", schema_pb2.FLOAT), ("hour", schema_pb2.INT), ("company", schema_pb2.BYTES),
                       ("stops", schema_pb2.FLOAT)):
        feature = schema.feature.add(name=name, type=kind)
        if name != "stops":
            feature.value_count.min = feature.value_count.max = 1
    return schema


def _example(n: int) -> bytes:
    import tensorflow as tf

    feature = {"fare": tf.train.Feature(float_list=tf.train.FloatList(value=[n / 3.0])),
               "hour": tf.train.Feature(int64_list=tf.train.Int64List(value=[n % 24])),
               "company": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"c{n % 7}".encode()]))}
    if n % 5:
        feature["stops"] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(i) for i in range(n % 5)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _files(folder, sizes: list[int], suffix: str = ".gz") -> list[bytes]:
    """Files of ``sizes`` examples each, written as ExampleGen writes them; their records in order."""
    os.makedirs(folder, exist_ok=True)
    records, start = [], 0
    for index, size in enumerate(sizes):
        mine = [_example(n) for n in range(start, start + size)]
        data = bytes(tfrecords.frames(mine))
        with open(os.path.join(folder, f"data_tfrecord-{index:05d}{suffix}"), "wb") as handle:
            handle.write(gzip.compress(data) if suffix == ".gz" else data)
        records.extend(mine)
        start += size
    return records


def _kept(batch, folder: str) -> None:
    """A batch's rows kept in a file of their own (a Beam step runs a pickled copy of what it is given)."""
    with open(os.path.join(folder, uuid.uuid4().hex), "wb") as handle:
        pickle.dump(batch.to_pylist(), handle)


def _rows(tfxio, source, batch_size: int | None, folder) -> tuple[list[dict], list[int]]:
    """The rows (sorted by fare) and the batch lengths ``source`` gives for ``tfxio``."""
    os.makedirs(folder)
    with beam.Pipeline(argv=direct_args("in_memory", 1)) as pipeline:
        _ = pipeline | source(tfxio, batch_size) | beam.Map(_kept, str(folder))
    batches = []
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as handle:
            batches.append(pickle.load(handle))
    rows = [row for batch in batches for row in batch]
    return sorted(rows, key=lambda row: row["fare"]), [len(batch) for batch in batches]


def _theirs(tfxio, batch_size: int | None):
    return tfxio.BeamSource(batch_size)


def _ours(tfxio, batch_size: int | None):
    """The source as TFX's Transform and StatisticsGen ask for it while tfxd's executors run (a projected
    TFXIO included)."""
    with example_files.batched_reads():
        return tfxio.BeamSource(batch_size)


@pytest.mark.parametrize("raw", [None, RAW], ids=["decoded", "with raw records"])
def test_the_rows_of_tfxios_source(tmp_path, raw):
    records = _files(tmp_path / "in", [700, 1, 2345])
    tfxio = tf_example_record.TFExampleRecord(str(tmp_path / "in" / "*"), schema=_schema(),
                                              raw_record_column_name=raw)
    theirs, _ = _rows(tfxio, _theirs, None, tmp_path / "theirs")
    ours, sizes = _rows(tfxio, _ours, None, tmp_path / "ours")
    assert len(theirs) == 3046
    assert ours == theirs
    # the batches never cross a file and hold 1,000 at most, as Beam's batches for tfx_bsl do
    assert sorted(sizes) == sorted([700, 1, 1000, 1000, 345])
    if raw:
        assert sorted(row[RAW][0] for row in ours) == sorted(records)


def test_projection_and_batch_size(tmp_path):
    _files(tmp_path / "a", [40, 13])
    _files(tmp_path / "b", [7])
    tfxio = tf_example_record.TFExampleRecord([str(tmp_path / "a" / "*"), str(tmp_path / "b" / "*")],
                                              schema=_schema()).Project(["fare", "stops"])
    theirs, _ = _rows(tfxio, _theirs, 10, tmp_path / "theirs")
    ours, sizes = _rows(tfxio, _ours, 10, tmp_path / "ours")
    assert set(ours[0]) == {"fare", "stops"}
    assert ours == theirs and len(ours) == 60
    assert sorted(sizes) == sorted([10, 10, 10, 10, 10, 3, 7])


def test_files_that_are_not_gzipped_go_to_tfxs_source(tmp_path):
    _files(tmp_path / "in", [5], suffix="")
    asked = []

    def tfx_source(tfxio, batch_size):
        asked.append(batch_size)
        return TFX_SOURCE(tfxio, batch_size)

    tfxio = tf_example_record.TFExampleRecord(str(tmp_path / "in" / "*"), schema=_schema())
    rows, _ = _rows(tfxio, example_files.beam_source(tfx_source), 8, tmp_path / "rows")
    assert asked == [8] and len(rows) == 5
    # a pattern that matches nothing is TFX's to refuse, too
    assert example_files._gzipped_files([str(tmp_path / "none-*")]) is None


def test_a_damaged_file_is_refused_with_its_name(tmp_path):
    _files(tmp_path / "in", [30])
    path = tmp_path / "in" / "data_tfrecord-00000.gz"
    data = bytearray(gzip.decompress(path.read_bytes()))
    data[12 + len(_example(0)) - 1] ^= 0x01  # the first record's last byte
    path.write_bytes(gzip.compress(bytes(data)))
    tfxio = tf_example_record.TFExampleRecord(str(tmp_path / "in" / "*"), schema=_schema())
    with pytest.raises(Exception, match=r"data_tfrecord-00000\.gz: the record at inflated byte 0 does not match its CRC"):
        _rows(tfxio, _ours, None, tmp_path / "rows")


def test_tfxio_reads_through_it_only_for_the_block():
    assert "BeamSource" not in vars(tf_example_record.TFExampleRecord)
    with example_files.batched_reads():
        assert tf_example_record.TFExampleRecord.BeamSource is not TFX_SOURCE
    assert tf_example_record.TFExampleRecord.BeamSource is TFX_SOURCE
    assert "BeamSource" not in vars(tf_example_record.TFExampleRecord)


def _float_files(folder, files: int, rows: int) -> None:
    """``files`` gzipped files of ``rows`` examples of one float feature, x, drawn at random (seeded)."""
    import numpy as np
    import tensorflow as tf

    os.makedirs(folder)
    values = np.random.default_rng(7).lognormal(size=(files, rows)).astype(np.float32)
    for index, chunk in enumerate(values):
        records = [tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=[v]))})).SerializeToString()
            for v in chunk.tolist()]
        with open(os.path.join(folder, f"data_tfrecord-{index:05d}.gz"), "wb") as handle:
            handle.write(gzip.compress(bytes(tfrecords.frames(records))))


def _buckets(tfxio, source, folder, probe):
    """tf.Transform's approximate quantiles of x (tft.bucketize) analysed from ``source`` by two Beam worker
    processes, as a Transform with beam.workers 2 runs: the buckets of the ``probe`` values."""
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam

    def preprocessing_fn(inputs):
        return {"bucket": tft.bucketize(inputs["x"], 20, epsilon=0.05)}

    with beam.Pipeline(argv=direct_args("multi_processing", 2)) as pipeline, \
            tft_beam.Context(temp_dir=str(folder / "tmp"), force_tf_compat_v1=True):
        transform_fn = ((pipeline | source(tfxio, None), tfxio.TensorAdapterConfig())
                        | tft_beam.AnalyzeDataset(preprocessing_fn))
        _ = transform_fn | tft_beam.WriteTransformFn(str(folder / "out"))
    layer = tft.TFTransformOutput(str(folder / "out")).transform_features_layer()
    return layer({"x": probe})["bucket"].numpy().ravel().tolist()


def test_approximate_quantiles_see_the_rows_as_from_tfxs_source(tmp_path, monkeypatch):
    """The workers get the files as Beam's TFRecord source hands them out (Beam's match order, one file to
    each worker in turn), each reads its files in that order: tf.Transform's approximate quantiles (its
    sketch depends on which rows each worker sees, in which order) come out as from TFX's read. Any other
    spread of the files moves boundaries: the check bites."""
    import numpy as np
    import tensorflow as tf

    _float_files(tmp_path / "in", 8, 20_000)
    schema = schema_pb2.Schema()
    feature = schema.feature.add(name="x", type=schema_pb2.FLOAT)
    feature.shape.dim.add(size=1)
    feature.presence.min_fraction = 1.0
    tfxio = tf_example_record.TFExampleRecord(str(tmp_path / "in" / "*"), schema=schema)
    probe = tf.constant(np.linspace(0.0, 8.0, 4001, dtype=np.float32)[:, None])
    theirs = _buckets(tfxio, _theirs, tmp_path / "theirs", probe)
    assert sorted(set(theirs)) == list(range(20))
    assert _buckets(tfxio, _ours, tmp_path / "ours", probe) == theirs

    matched = example_files._gzipped_files
    monkeypatch.setattr(example_files, "_gzipped_files", lambda patterns: sorted(matched(patterns) or []))
    assert _buckets(tfxio, _ours, tmp_path / "sorted", probe) != theirs
