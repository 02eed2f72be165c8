"""The Trainer's input pipeline: Transform's output (GZIP TFRecords of tf.Example) read as serialized
records (local files in sequence, files on a remote store in parallel), cached (in memory, when they
are small), shuffled, repeated, then batched and parsed a batch at a time with Transform's feature spec,
prefetched as the spec says, sharded as the plan says.

Shuffling the serialized records before the batched parse gives the same example-level shuffle (a
fresh order every epoch, also over the cache) as parsing batches, then unbatch/shuffle/batch of the
parsed features, which runs example by example on one thread and held the Trainer's input below a
plain tf.data read of the same files (bench/input_pipeline.py measures both). Caching the records keeps
the file reads and decompression to the first epoch.

A validation reads the same batches every time (the eval split from its start, unshuffled), each time
through a new iterator Keras makes: where they are small, they are read and parsed once and kept in
memory, parsed (``validation``).

Local files are read in the reading thread, one record after another: a parallel interleave hands each
record to the next thread under a lock, which for tf.Examples of a few hundred bytes costs more than
reading and decompressing them (bench/input_pipeline.py measures the plain read both ways). Files on a
remote store (gs://, s3://, hdfs://) are still read in parallel, where each read's latency is what there
is to hide.
"""

from __future__ import annotations

import math
from typing import Any

from tfxd.files import is_uri
from tfxd.trainer_module.planner import Plan, Strategy


def dataset(files: list[str], tf_transform_output: Any, label: str, plan: Plan, input_spec: dict[str, Any],
            seed: int | None, shuffle: bool = True, batch_size: int | None = None) -> Any:
    """Batches of (features, label) at the plan's global batch size (or ``batch_size``, a validation's),
    repeated forever.

    ``files`` are file patterns (TFX's train_files / eval_files). Not through TFX's data accessor:
    TFXIO parses as it batches, which leaves no place for a shuffle of records over a cache."""
    import tensorflow as tf

    names = tf.data.Dataset.list_files(files, shuffle=shuffle, seed=seed)
    parallel = _parallel_reads(input_spec["parallel_reads"], files)
    # the pipeline's functions are straight-line TensorFlow: traced without AutoGraph transpiling their
    # source first, which tf.data does unless told not to (trainer_module/export.py, _signatures)
    plain = tf.autograph.experimental.do_not_convert
    records = names.interleave(plain(_records), num_parallel_calls=tf.data.AUTOTUNE if parallel else None)
    if _cache(input_spec["cache"], files):
        records = records.cache()
    buffer = input_spec["shuffle_buffer"]
    if shuffle and buffer:
        # shuffle examples, not batches: a fresh order every epoch, also over a cached dataset
        records = records.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    feature_spec = tf_transform_output.transformed_feature_spec()

    def parse(serialized: Any) -> Any:
        features = tf.io.parse_example(serialized, feature_spec)
        return features, features.pop(label)

    data = records.repeat().batch(batch_size or plan.global_batch_size, drop_remainder=plan.strategy is Strategy.TPU)
    data = data.map(plain(parse), num_parallel_calls=tf.data.AUTOTUNE)
    prefetch = input_spec["prefetch"]
    data = data.prefetch(tf.data.AUTOTUNE if prefetch == "auto" else prefetch)
    return data.with_options(_options(plan, seed))


MEMORY_CACHE_LIMIT_BYTES = 64 << 20  # the records' files, compressed; a validation's batches, parsed

# the strategies whose Keras iterates the validation dataset it is given, in this process: the others
# hand it to a cluster's workers or a TPU's host, as a copy whose cache would start empty
KEPT_VALIDATION_STRATEGIES = frozenset({Strategy.DEFAULT, Strategy.ONE_DEVICE, Strategy.MIRRORED})


def validation(files: list[str], tf_transform_output: Any, label: str, plan: Plan, input_spec: dict[str, Any],
               seed: int | None, batch_size: int, steps: int) -> Any:
    """What each validation reads: ``steps`` batches of ``batch_size`` from the eval split's start, the same
    batches every time, since Keras validates through a new iterator each epoch and the split is not
    shuffled. Where they are small (_keep_validation), they are read and parsed once, here, and kept in
    memory, parsed: a later validation starts no reading pipeline (its iterator alone about 7 ms on taxi,
    the 15 batches of 400 read and parsed another 10, at each of 10 validations). Read to their end here,
    so that the cache is whole before any fit reads it, however far a strategy's iterator reads: tf.data
    drops a cache read only in part when its iterator goes."""
    keep = _keep_validation(input_spec["cache"], tf_transform_output, plan, batch_size * steps)
    # kept parsed, the records need no cache of their own
    spec = {**input_spec, "cache": False} if keep else input_spec
    data = dataset(files, tf_transform_output, label, plan, spec, seed, shuffle=False, batch_size=batch_size)
    if not keep:
        return data
    kept = data.take(steps).cache()
    for _ in kept:
        pass
    return kept.repeat()


def _keep_validation(choice: str | bool, tf_transform_output: Any, plan: Plan, examples: int) -> bool:
    """Whether to keep a validation's batches in memory, parsed: never where ``training.input.cache`` is
    false or the strategy copies the dataset elsewhere; always where it is true; ``auto`` where every
    transformed feature has a fixed size and ``examples`` of them fit in MEMORY_CACHE_LIMIT_BYTES."""
    if choice is False or plan.strategy not in KEPT_VALIDATION_STRATEGIES:
        return False
    if choice is True:
        return True
    size = _example_bytes(tf_transform_output.transformed_feature_spec())
    return size is not None and size * examples <= MEMORY_CACHE_LIMIT_BYTES


def _example_bytes(feature_spec: dict[str, Any]) -> int | None:
    """Bytes of one parsed example, where every feature is a number of a fixed shape; None otherwise (a
    string's or a variable length's size is known only once read)."""
    import tensorflow as tf

    size = 0
    for feature in feature_spec.values():
        if not isinstance(feature, tf.io.FixedLenFeature) or feature.dtype == tf.string:
            return None
        size += math.prod(feature.shape) * feature.dtype.size
    return size


def _cache(choice: str | bool, files: list[str]) -> bool:
    """Whether to keep the records in memory: ``auto`` only when the files are small enough that memory
    stays bounded by design (above, each epoch reads the files again)."""
    if choice != "auto":
        return bool(choice)
    import tensorflow as tf

    total = 0
    for pattern in files:
        for path in tf.io.gfile.glob(pattern):
            total += tf.io.gfile.stat(path).length
            if total > MEMORY_CACHE_LIMIT_BYTES:
                return False
    return True


def _parallel_reads(choice: str | bool, files: list[str]) -> bool:
    """Whether to read the files in parallel: ``auto`` only when they are on a remote store (a URL), where
    parallel reads hide each read's latency; on a local disk a sequential read is faster for small records."""
    if choice != "auto":
        return bool(choice)
    return any(is_uri(pattern) for pattern in files)


def _records(name: Any) -> Any:
    """The serialized tf.Examples of one file; GZIP when its name ends with .gz, as TFXIO decides."""
    import tensorflow as tf

    compression = tf.where(tf.strings.regex_full_match(name, r".*\.gz"), "GZIP", "")
    return tf.data.TFRecordDataset(name, compression_type=compression)


def _options(plan: Plan, seed: int | None) -> Any:
    """The shard policy the plan chose; without a seed, tf.data may hand out elements in the order they
    are ready (interleaved files, parallel parses) rather than wait for the next one in order, as a
    hand-written input pipeline does: with no seed the order is random anyway.

    Without tf.data's autotune model: its thread (Model::OptimizeLoop, started by the iterator's
    RootDataset) sleeps between optimizations for a period that doubles up to a minute, and the iterator's
    destructor waits for it. When Keras' fit returned and dropped its iterator, the Trainer sat idle for
    the rest of that sleep, up to a minute at 0 % CPU after an epoch, in some runs and not others (gdb:
    ~RootDataset::Iterator waiting on the model thread's timed wait). The parse keeps AUTOTUNE's starting
    parallelism and the prefetch its own buffer tuning, neither of which needs the model; the taxi input
    read as fast without it (bench/input_pipeline.py)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.deterministic = seed is not None
    options.autotune.enabled = False  # no model thread for the iterator's destructor to wait for
    policy = {"file": tf.data.experimental.AutoShardPolicy.FILE,
              "data": tf.data.experimental.AutoShardPolicy.DATA,
              "off": tf.data.experimental.AutoShardPolicy.OFF}[plan.shard_policy]
    options.experimental_distribute.auto_shard_policy = policy
    return options
