"""The Trainer's run_fn: everything a TFX user hand-writes, from the spec.

Plan the strategy (before any TF op), build it, read Transform's output, build
the model in the strategy's scope, fit with the spec's callbacks, export with
serving and transform_features signatures, and leave the plan and the final
metrics next to the model. Referenced by dotted path from the pipeline image.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable
from typing import Any

from absl import logging

from tfxd import console, heap, keys, pushed, stops, tf_env, training_report
from tfxd.trainer_config import TrainerCustomConfig
from tfxd.trainer_module import callbacks as callback_builder
from tfxd.trainer_module import data, export, models, planner, strategy, traced_once, warm_start
from tfxd.trainer_module.planner import MULTI_WORKER, Strategy


def make_plan(spec: dict[str, Any], train_files: int | None) -> tuple[planner.Plan, Any]:
    """The plan for this process, from its environment and devices (no TF op is run)."""
    devices, tpu_resolver = strategy.detect_devices(os.environ)
    plan = planner.plan(os.environ, devices, **plan_settings(spec["training"]), train_files=train_files)
    return plan, tpu_resolver


def plan_settings(training: dict[str, Any]) -> dict[str, Any]:
    """`planner.plan`'s arguments that the spec's training section decides; one reading for the Trainer and
    for bench/strategies.py (which overrides strategy and batch_size), so a new planner input reaches both."""
    return {"strategy": training["strategy"], "batch_size": training["batch_size"],
            "mixed_precision": training["mixed_precision"], "all_reduce": training["all_reduce"],
            "steps_per_execution": training["steps_per_execution"],
            "custom_callbacks": bool(training["callbacks"]["custom"])}


def schedule(training: dict[str, Any], train_examples: int | None, global_batch: int) -> tuple[int, int]:
    """(epochs, steps per epoch): `steps` is spread over up to 10 epochs (a progress line and a validation
    each); `epochs` walks the train split once per epoch."""
    if training.get("epochs"):
        if not train_examples:
            raise ValueError("training.epochs needs the train split's size, which ExampleGen did not record; "
                             "use training.steps")
        return training["epochs"], max(1, math.ceil(train_examples / global_batch))
    steps = training["steps"]
    epochs = min(10, steps)
    return epochs, math.ceil(steps / epochs)


# A validation step at a small batch costs mostly the step itself (a call of the compiled test step, a batch
# handed over by tf.data), not its examples' forward pass: validation reads its examples in fewer, larger
# batches, of at most this many examples (or the global batch, where that is larger): a forward pass, with
# no activations kept for gradients, so smaller than a training step of the global batch.
EVAL_BATCH_EXAMPLES = 512


def eval_schedule(eval_steps: int, global_batch: int) -> tuple[int, int]:
    """(batch size, steps) of each validation: the spec's `eval_steps` batches of the global batch size, read
    as fewer batches of a whole number of them (the most that divides `eval_steps` and stays within
    EVAL_BATCH_EXAMPLES). The same examples in the same order, so Keras' metrics, means weighted by examples
    (its loss by the batch's size), come out the same: taxi's 150 steps of 40 are 15 of 400."""
    limit = max(global_batch, EVAL_BATCH_EXAMPLES)
    merged = max(k for k in range(1, eval_steps + 1) if eval_steps % k == 0 and global_batch * k <= limit)
    return global_batch * merged, eval_steps // merged


def run_fn(fn_args: Any) -> training_report.TrainingReport | training_report.PlanRecord:
    """Train as the plan says; what was trained (the report the chief also writes beside the model), or,
    for a task that only serves a ParameterServer cluster, its plan."""
    heap.settle()  # what the Trainer's process imported, kept out of full collections (tfxd.heap)
    config = TrainerCustomConfig.from_json(fn_args.custom_config)
    spec = _with_run_args(config.spec, fn_args)
    plan, tpu_resolver = make_plan(spec, len(fn_args.train_files))
    if plan.role == "serve":  # a ps or worker task of a ParameterServer cluster: serve until stopped
        return _serve(plan)
    with tf_env.graphs_built_plainly():  # the steps', the data's and the export's graphs, the same, cheaper
        return _train(fn_args, config, spec, plan, tpu_resolver)


def _with_run_args(spec: dict[str, Any], fn_args: Any) -> dict[str, Any]:
    """The spec with the run's TrainArgs / EvalArgs in its training section: they win over the spec, since a
    compiled pipeline takes them as runtime parameters."""
    training = {**spec["training"], "eval_steps": fn_args.eval_steps or spec["training"]["eval_steps"]}
    if not training.get("epochs") and fn_args.train_steps:
        training["steps"] = fn_args.train_steps
    return {**spec, "training": training}


def _serve(plan: planner.Plan) -> training_report.PlanRecord:
    """A ps or worker task of a ParameterServer cluster trains nothing itself: it serves the cluster's
    coordinator until it is stopped, then reports its plan."""
    import tensorflow as tf

    strategy.export_cluster(plan)
    cluster = (plan.cluster or {}).get("cluster", {})  # a serving task is one of a cluster's
    workers = len(cluster.get("worker", []))
    # too few inter-op threads and a ParameterServer cluster hangs (docs/distributed.md, the traps)
    threads = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=max(os.cpu_count() or 1, workers + 1))
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=plan.task["type"],
                                  task_index=plan.task["index"], protocol="grpc", config=threads, start=True)
    stops.reclaim()  # TensorFlow's runtime took SIGTERM: a stop ends the server (tfxd.stops)
    server.join()
    return plan.record()


def _train(fn_args: Any, config: TrainerCustomConfig, spec: dict[str, Any], plan: planner.Plan,
           tpu_resolver: Any) -> training_report.TrainingReport:
    """Every task that trains (the chief, a worker of a multi-worker strategy, a one-process run): read
    Transform's output, build and fit the model, export it. The chief alone writes beside the model: the
    report the run's summary reads, and the data record (what the weights depend on, the spans read) that
    a later warm start and the next run's check for new data read."""
    import tensorflow as tf
    import tensorflow_transform as tft

    training = spec["training"]
    distribution = strategy.build(plan, tpu_resolver, peer_timeout=training.get("peer_timeout"))
    stops.reclaim()  # a multi-worker strategy's runtime took SIGTERM: a stop must still stop (tfxd.stops)
    if training.get("seed") is not None:
        tf.keras.utils.set_random_seed(training["seed"])
    tf_output = tft.TFTransformOutput(fn_args.transform_output)
    info = feature_info(fn_args.transform_output)
    label = info["label"]["name"]
    epochs, steps_per_epoch = schedule(training, config.train_examples, plan.global_batch_size)

    def train_data(context: Any = None) -> Any:
        return data.dataset(fn_args.train_files, tf_output, label, plan,
                            training["input"], training.get("seed"))

    eval_batch, eval_steps = eval_schedule(training["eval_steps"], plan.global_batch_size)
    eval_data = data.validation(fn_args.eval_files, tf_output, label, plan, training["input"],
                                training.get("seed"), eval_batch, eval_steps)
    model, inputs, warm = _build_model(spec, info, plan, distribution, fn_args)
    builtin_layers = models.keras_layers_only(spec)  # no AutoGraph for the steps nor the export (either's docstring)
    history, callbacks = _fit(model, train_data, (eval_data, eval_steps), training, fn_args, config, plan,
                              epochs, steps_per_epoch, builtin_layers)
    checksum = weights_checksum(model)
    logging.info("tfxd trainer: strategy=%s replicas=%d is_chief=%s weights_checksum=%.12g", plan.strategy,
                 distribution.num_replicas_in_sync, plan.is_chief, checksum)
    if plan.strategy is Strategy.MULTI_WORKER_MIRRORED:
        _check_agreement(distribution, checksum)
    export.save(model, tf_output, label, list(config.label_only), fn_args.serving_model_dir, plan.is_chief,
                builtin_layers=builtin_layers)
    result = training_report.TrainingReport(
        plan=plan.record(), epochs=len(history.epoch), steps_per_epoch=steps_per_epoch,
        replicas_in_sync=distribution.num_replicas_in_sync, weights_checksum=checksum, history=callbacks[0].history,
        metrics={k: float(v[-1]) for k, v in history.history.items()}, warm_start=warm)
    if plan.is_chief:
        model_dir = os.path.dirname(fn_args.serving_model_dir.rstrip("/"))  # the model artifact's folder
        training_report.write(model_dir, result)
        pushed.write_data_record(fn_args.serving_model_dir, pushed.DataRecord(inputs, config.spans))
        training_report.write(os.path.join(fn_args.serving_model_dir, pushed.EXTRA_DIR), result)  # pushed with it
    return result


def _build_model(spec: dict[str, Any], info: dict[str, Any], plan: planner.Plan, distribution: Any,
                 fn_args: Any) -> tuple[Any, Any, dict[str, Any] | None]:
    """The model, built in the strategy's scope so that its variables are the strategy's; what its weights
    depend on (the warm start compares it, the data record keeps it); the warm start's account when the
    spec asks for one, with the checksum of the weights it started from (its proof)."""
    with distribution.scope():
        model = models.build(spec, info, plan.steps_per_execution)
        inputs = warm_start.inputs_record(model, info, fn_args.transform_output)
        warm = warm_start.start(model, fn_args.base_model, inputs) if spec["training"].get("warm_start") else None
    if warm is not None:
        warm["weights_checksum"] = weights_checksum(model)
        if plan.is_chief:
            _say_warm_start(warm)
    return model, inputs, warm


def _fit(model: Any, train_data: Callable[..., Any], validation: tuple[Any, int], training: dict[str, Any],
         fn_args: Any, config: TrainerCustomConfig, plan: planner.Plan, epochs: int, steps_per_epoch: int,
         builtin_layers: bool) -> tuple[Any, list[Any]]:
    """model.fit with the spec's callbacks: Keras's history and the callbacks (the first, the progress
    line's, keeps the history the report records); ``validation`` is the eval data and its steps
    (eval_schedule), ``epochs`` and ``steps_per_epoch`` the schedule's; ``builtin_layers``: the model has
    Keras' own layers only, so its steps are traced without AutoGraph (traced_once). A ParameterServer
    strategy's coordinator takes its train data as a DatasetCreator, which builds it on each worker."""
    import tensorflow as tf

    train = (tf.keras.utils.experimental.DatasetCreator(train_data) if plan.strategy is Strategy.PARAMETER_SERVER
             else train_data())
    single_worker = plan.strategy not in MULTI_WORKER
    callbacks = callback_builder.build(training["callbacks"], fn_args.model_run_dir, config.backup_dir,
                                       epochs, plan.is_chief, steps_per_epoch, single_worker,
                                       batch_level=plan.strategy is not Strategy.PARAMETER_SERVER)
    # a signal stops a single worker when its current call of the compiled step ends (at most
    # plan.steps_per_execution steps), its state backed up (tfxd.stops)
    with stops.deferring() if single_worker else contextlib.nullcontext(), traced_once.steps_traced_once(
            model, plan.strategy, train, autograph=not builtin_layers):
        history = model.fit(train, epochs=epochs, steps_per_epoch=steps_per_epoch, validation_data=validation[0],
                            validation_steps=validation[1], callbacks=callbacks, verbose=0)
    return history, callbacks


def weights_checksum(model: Any) -> float:
    """The sum of every weight: equal for equal weights (the warm start's proof, a cluster's agreement)."""
    import tensorflow as tf

    return float(sum(float(tf.reduce_sum(tf.cast(w, tf.float64))) for w in model.weights))


def _check_agreement(distribution: Any, checksum: float) -> None:
    """Gather every replica's weights checksum over the cluster's collectives: a warning when the workers
    ended with different weights. Being a collective, it also holds the chief until every worker has
    finished training and said so: the chief's exit ends the job (its success policy), stopping the rest."""
    import tensorflow as tf

    @tf.function
    def gathered() -> Any:
        return distribution.gather(distribution.run(lambda: tf.constant([checksum], tf.float64)), axis=0)

    sums = sorted(set(float(value) for value in gathered().numpy()))
    if len(sums) > 1:
        logging.warning("tfxd trainer: the replicas ended with different weights (checksums %s); the cluster "
                        "did not train in step", ", ".join(f"{value:.12g}" for value in sums))
    else:
        logging.info("tfxd trainer: all %d replicas hold the same weights", distribution.num_replicas_in_sync)


def _say_warm_start(warm: dict[str, Any]) -> None:
    if warm["started"]:
        console.info(f"Trainer warm-starts from {warm['from']}")
    elif warm["from"] is None:
        console.info(f"Trainer starts from scratch: {warm['reason']} to warm-start from")
    else:
        console.warn(f"Trainer cannot warm-start from {warm['from']}: {warm['reason']}; it trains from scratch")


def feature_info(transform_output: str) -> dict[str, Any]:
    """What Transform recorded about each transformed feature and the label (keys.FEATURE_INFO_FILE)."""
    import tensorflow as tf

    with tf.io.gfile.GFile(os.path.join(transform_output, keys.FEATURE_INFO_FILE), "r") as handle:
        info: dict[str, Any] = json.loads(handle.read())
    return info
