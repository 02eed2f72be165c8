"""The Trainer's input pipeline: Transform's output through TFX's data accessor, then cache, shuffle,
repeat and prefetch as the spec says, sharded as the plan says."""

from __future__ import annotations

from typing import Any

from trainer_module.planner import Plan


def dataset(files: list[str], data_accessor: Any, tf_transform_output: Any, label: str, plan: Plan,
            input_spec: dict[str, Any], seed: int | None, shuffle: bool = True):
    """Batches of (features, label) at the plan's global batch size, repeated forever."""
    import tensorflow as tf
    from tfx_bsl.public import tfxio

    batch = plan.global_batch_size
    options = tfxio.TensorFlowDatasetOptions(batch_size=batch, label_key=label, num_epochs=1, shuffle=False,
                                             drop_final_batch=plan.strategy == "tpu")
    data = data_accessor.tf_dataset_factory(files, options, tf_transform_output.transformed_metadata.schema)
    if input_spec["cache"]:
        data = data.cache()
    buffer = input_spec["shuffle_buffer"]
    if shuffle and buffer:
        # shuffle examples, not batches: a fresh order every epoch, also over a cached dataset
        data = data.unbatch().shuffle(buffer, seed=seed, reshuffle_each_iteration=True).batch(
            batch, drop_remainder=plan.strategy == "tpu")
    data = data.repeat()
    prefetch = input_spec["prefetch"]
    data = data.prefetch(tf.data.AUTOTUNE if prefetch == "auto" else prefetch)
    return data.with_options(_options(plan))


def _options(plan: Plan):
    import tensorflow as tf

    options = tf.data.Options()
    policy = {"file": tf.data.experimental.AutoShardPolicy.FILE,
              "data": tf.data.experimental.AutoShardPolicy.DATA,
              "off": tf.data.experimental.AutoShardPolicy.OFF}[plan.shard_policy]
    options.experimental_distribute.auto_shard_policy = policy
    return options
