"""The strategy adapter for real on CPUs: each case in a fresh interpreter, since a TensorFlow runtime
can be configured only once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO
from tfxd.trainer_module.strategy import resolve_tpu, tpu_address

TINY_MODEL = """
import numpy as np, tensorflow as tf
from tfxd.trainer_module import models
SPEC = {"model": {"type": "dnn", "hidden_units": [8], "dropout": 0.0, "optimizer": "adam",
                  "metrics": ["accuracy"]}}
INFO = {"features": {"x": {"kind": "float", "shape": [], "cardinality": None},
                     "c": {"kind": "id", "shape": [], "cardinality": 5}},
        "label": {"name": "y", "task": "binary", "num_classes": None}}

def data(batch):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 1)).astype("float32")
    c = rng.integers(0, 5, size=(512, 1))
    y = (x[:, 0] > 0).astype("int64")
    return tf.data.Dataset.from_tensor_slices(({"x": x, "c": c}, y)).repeat().batch(batch)
"""


# the signal tests' setup: the spec's callbacks with backups, and a callback that records each [epoch, step]
# (from 1) and acts at it (``at``)
STEPS = """
import json
import signal
from tfxd import stops
from tfxd.trainer_module import callbacks

CONFIG = {"tensorboard": False, "backup_and_restore": True, "terminate_on_nan": False,
          "early_stopping": None, "reduce_lr_on_plateau": None, "custom": [],
          "backup_every_steps": 1000}

class SeenSteps(tf.keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.seen = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append([int(self.epoch) + 1, int(batch) + 1])
        self.at(self.seen[-1])
"""


def run_fresh(code: str, env: dict[str, str] | None = None, timeout: int = 300) -> dict:
    """Run the tiny model's setup and ``code`` in a new interpreter; it prints one line 'RESULT {json}'."""
    full_env = {key: value for key, value in os.environ.items() if key not in ("TF_CONFIG", "CLUSTER_SPEC")}
    full_env.update({"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})})
    program = "import tfxd\n" + TINY_MODEL + textwrap.dedent(code)
    result = subprocess.run([sys.executable, "-c", program],
                            capture_output=True, text=True, env=full_env, timeout=timeout, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_detection_leaves_the_runtime_unstarted_and_mirrored_runs_on_two_logical_cpus():
    result = run_fresh("""
        import json
        from tfxd.trainer_module import planner, strategy
        devices, _ = strategy.detect_devices({})
        cpu = tf.config.list_physical_devices("CPU")[0]
        # would raise RuntimeError if detection had started the runtime
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        after, _ = strategy.detect_devices({})
        auto = planner.plan({}, after, batch_size=16)
        plan = planner.plan({}, after, strategy="mirrored", batch_size=16)
        dist = strategy.build(plan)
        with dist.scope():
            model = models.build(SPEC, INFO)
        history = model.fit(data(plan.global_batch_size), steps_per_epoch=5, epochs=2, verbose=0)
        print("RESULT", json.dumps({"before": devices.cpu_devices, "after": after.cpu_devices, "auto": auto.strategy,
                                    "replicas": dist.num_replicas_in_sync, "global_batch": plan.global_batch_size,
                                    "epochs": len(history.history["loss"])}))
    """)
    assert result == {"before": 1, "after": 2, "auto": "default", "replicas": 2, "global_batch": 32, "epochs": 2}


def test_parameter_server_on_an_in_process_cluster():
    result = run_fresh("""
        import json, os, portpicker
        from tfxd.trainer_module import planner, strategy
        ports = [portpicker.pick_unused_port() for _ in range(4)]
        cluster = {"chief": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}", f"localhost:{ports[2]}"],
                   "ps": [f"localhost:{ports[3]}"]}
        spec = tf.train.ClusterSpec(cluster)
        # in-process workers need enough inter-op threads, or the cluster hangs (docs/distributed.md)
        config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=4)
        servers = [tf.distribute.Server(spec, job_name=kind, task_index=index, protocol="grpc", config=config,
                                        start=True)
                   for kind, index in (("worker", 0), ("worker", 1), ("ps", 0))]
        env = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})}
        devices, _ = strategy.detect_devices(env)
        plan = planner.plan(env, devices, batch_size=16)
        os.environ.update(env)
        dist = strategy.build(plan)
        with dist.scope():
            model = models.build(SPEC, INFO)
        creator = tf.keras.utils.experimental.DatasetCreator(lambda context: data(plan.global_batch_size))
        history = model.fit(creator, steps_per_epoch=10, epochs=2, verbose=0)
        print("RESULT", json.dumps({"strategy": plan.strategy, "replicas": plan.replicas,
                                    "workers": dist.extended._num_workers if hasattr(dist.extended, "_num_workers")
                                    else None, "epochs": len(history.history["loss"])}))
    """, env={"GRPC_FAIL_FAST": "use_caller"}, timeout=180)
    assert result["strategy"] == "parameter_server"
    assert result["replicas"] == 2
    assert result["epochs"] == 2


COORDINATION = """
    import json, os, portpicker
    from tensorflow.python.eager import context
    from tfxd.trainer_module import planner, strategy
    cluster = {{"chief": [f"localhost:{{portpicker.pick_unused_port()}}"]}}
    env = {{"TF_CONFIG": json.dumps({{"cluster": cluster, "task": {{"type": "chief", "index": 0}}}})}}
    os.environ.update(env)
    plan = planner.plan(env, strategy.detect_devices(env)[0], strategy="multi_worker_mirrored", batch_size=16)
    dist = strategy.build(plan, peer_timeout={timeout})
    config = context.context().coordination_service
    print("RESULT", json.dumps({{"replicas": dist.num_replicas_in_sync, "leader": config.service_leader,
                                "jobs": [[job.name, job.num_tasks] for job in config.coordinated_job_list],
                                "heartbeat_ms": config.heartbeat_timeout_in_ms}}))
"""


def test_peer_timeout_is_the_coordination_services_heartbeat_timeout_and_the_rest_as_tensorflow_sets_it():
    """training.peer_timeout configures the coordination service before MultiWorkerMirroredStrategy does;
    TensorFlow's strategy keeps it (it configures an unconfigured context only), and the rest is what the
    strategy itself would have set, as it sets it without one (its own leader and coordinated jobs)."""
    ours = run_fresh(COORDINATION.format(timeout=7), timeout=180)
    tensorflows = run_fresh(COORDINATION.format(timeout=None), timeout=180)
    assert ours["heartbeat_ms"] == 7000 and tensorflows["heartbeat_ms"] == 0  # 0: TensorFlow's default
    assert {**ours, "heartbeat_ms": 0} == tensorflows == {
        "replicas": 1, "leader": "/job:chief/replica:0/task:0", "jobs": [["chief", 1]], "heartbeat_ms": 0}


# The TPU path cannot run here (no TPU): these tests cover its seam, the detection that decides
# whether a TPU resolver is tried, and that a resolver error falls through to the other rules.
def test_tpu_detection_seam():
    assert tpu_address({"TPU_NAME": "my-tpu"}) == "my-tpu"
    assert tpu_address({}, exists=lambda path: path == "/dev/accel0") == "local"
    assert tpu_address({}, exists=lambda path: False) is None

    class Broken:
        def __init__(self, tpu):
            raise ValueError("no TPU here")

    class Found:
        def __init__(self, tpu):
            self.tpu = tpu

    assert resolve_tpu("my-tpu", Broken) is None
    assert resolve_tpu("my-tpu", Found).tpu == "my-tpu"
    assert resolve_tpu(None, Found) is None


@pytest.mark.parametrize("spe", [1, 3])
def test_backup_and_restore_resumes_after_an_interruption(tmp_path, spe):
    """Also with 3 steps per call of the compiled step on 5-step epochs (calls of 3, then 2): Keras counts
    the backup's save_freq in calls, and records the step a call began at (3, not 5), so the backup must
    still land on, and be recorded at, each epoch's last step (callbacks.step_backup)."""
    result = run_fresh(f"""
        import json
        from tfxd.trainer_module import callbacks

        CONFIG = {{"tensorboard": False, "backup_and_restore": True, "terminate_on_nan": True,
                   "early_stopping": None, "reduce_lr_on_plateau": None, "custom": [],
                   "backup_every_steps": 1000}}

        class Interrupt(tf.keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                if epoch == 0:
                    raise RuntimeError("killed after epoch 1")

        def attempt(extra):
            model = models.build(SPEC, INFO, {spe})
            built = callbacks.build(CONFIG, "{tmp_path}/run", "{tmp_path}/backup", 4, True, 5, True)
            try:
                model.fit(data(16), steps_per_epoch=5, epochs=4, callbacks=built + extra, verbose=0)
            except RuntimeError:
                pass
            return [entry["epoch"] for entry in built[0].history]

        first = attempt([Interrupt()])
        second = attempt([])
        print("RESULT", json.dumps({{"first": first, "second": second}}))
    """)
    assert result == {"first": [1], "second": [2, 3, 4]}


@pytest.mark.reliability("crash point")
@pytest.mark.parametrize(("spe", "resumed"), [(1, [[2, 4], [2, 5]]), (3, [[2, 5]])])
def test_a_signal_stops_the_training_at_a_step_whose_state_is_backed_up_and_the_retry_resumes_there(
        tmp_path, spe, resumed):
    """With 3 steps per call the batch hooks see steps 3 and 5 of an epoch: asked at step 3, the training
    stops where that call ends, and the retry runs steps 4 and 5 in its first call (Keras alone would
    record the step the call began at, 1, and train steps 2 and 3 again)."""
    result = run_fresh(STEPS + textwrap.dedent(f"""
        class Steps(SeenSteps):
            def at(self, step):
                if step[0] == 2 and step[1] >= 3 and stops.requested() is None and self.signal:
                    signal.raise_signal(signal.SIGTERM)  # as Kubernetes evicting the pod

        def attempt(send):
            steps = Steps()
            steps.signal = send
            model = models.build(SPEC, INFO, {spe})
            built = callbacks.build(CONFIG, "{tmp_path}/run", "{tmp_path}/backup", 4, True, 5, True)
            stopped = None
            try:
                with stops.deferring():  # as in a container of its own: it installs the handlers itself
                    model.fit(data(16), steps_per_epoch=5, epochs=4, callbacks=[steps] + built, verbose=0)
            except stops.Stopped as exc:
                stopped = exc.signum
            return {{"steps": steps.seen, "stopped": stopped}}

        print("RESULT", json.dumps({{"first": attempt(True), "second": attempt(False)}}))
    """))
    first, second = result["first"], result["second"]
    assert first["stopped"] == 15 and first["steps"][-1] == [2, 3]  # where the call it was asked in ends
    assert first["steps"][0] == [1, spe]
    assert second["stopped"] is None
    epoch = [*range(spe, 5, spe), 5]  # the last step of each call of an epoch
    # the retry goes on from the step after the backed-up one
    assert second["steps"] == resumed + [[e, s] for e in (3, 4) for s in epoch]


@pytest.mark.reliability("crash point")
@pytest.mark.parametrize(("spe", "backed_up", "resumed_at"), [(1, [5, 10, 15, 20], 11), (3, [6, 12, 18, 20], 13)])
def test_a_long_epoch_is_backed_up_every_few_steps_and_a_killed_training_redoes_only_those(
        tmp_path, spe, backed_up, resumed_at):
    """One epoch of 20 steps, training.callbacks.backup_every_steps 5: backups within the epoch (at the end
    of the call that reaches 5 steps since the last) and at its end; a training killed after step 14
    resumes after the last backup, redoing at most 5 steps, not the epoch (Keras's own save_freq would count
    calls across epochs and drift off the epoch's end)."""
    result = run_fresh(STEPS + textwrap.dedent(f"""
        CONFIG["backup_every_steps"] = 5
        notes = []
        callbacks.console.step = notes.append  # the chief's lines on the console

        class Steps(SeenSteps):
            def at(self, step):
                if self.kill and step[1] >= 14:
                    raise RuntimeError("killed")

        def attempt(kill):
            steps = Steps()
            steps.kill = kill
            model = models.build(SPEC, INFO, {spe})
            built = callbacks.build(CONFIG, "{tmp_path}/run", "{tmp_path}/backup", 2, True, 20, False)
            backup = next(c for c in built if isinstance(c, tf.keras.callbacks.BackupAndRestore))
            saved = []
            real = backup._backup
            backup._backup = lambda epoch, batch=0: (saved.append([int(epoch) + 1, int(batch) + 1]), real(epoch, batch))
            try:
                model.fit(data(16), steps_per_epoch=20, epochs=2, callbacks=[steps] + built, verbose=0)
            except RuntimeError:
                pass
            return {{"steps": steps.seen, "saved": saved}}

        print("RESULT", json.dumps({{"first": attempt(True), "second": attempt(False), "notes": notes}}))
    """))
    first, second = result["first"], result["second"]
    assert result["notes"][0] == (f"Trainer resumes at epoch 1/2, step {resumed_at} of 20, from the "
                                  f"BackupAndRestore checkpoint in {tmp_path}/backup")
    assert first["saved"] == [[1, step] for step in backed_up if step < 14]
    last = first["saved"][-1][1]
    assert second["steps"][0] == [1, min(resumed_at - 1 + spe, 20)]  # the call after the last backed-up step
    assert resumed_at == last + 1 and first["steps"][-1][1] - last <= 5
    assert [step for epoch, step in second["saved"] if epoch == 1][-1] == 20  # the epoch's end, backed up
    assert [step for epoch, step in second["saved"] if epoch == 2] == backed_up


def test_steps_per_execution_trains_the_same_weights_as_one_step_a_call():
    """Keras runs the same steps inside one call of its compiled step: the weights after 3 epochs of 10
    steps are equal, bit for bit, at 1, 4 (calls of 4, 4, 2) and 32 steps per call (truncated to the
    epoch), with a validation each epoch; the model reports the steps per call it was built with."""
    result = run_fresh("""
        import json
        weights, calls = {}, {}
        for spe in (1, 4, 32):
            tf.keras.utils.set_random_seed(7)
            model = models.build(SPEC, INFO, spe)
            seen = []
            hook = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(batch))
            model.fit(data(16), steps_per_epoch=10, epochs=3, validation_data=data(16), validation_steps=3,
                      callbacks=[hook], verbose=0)
            weights[spe] = [w.numpy().tobytes().hex() for w in model.weights]
            calls[spe] = [int(model.steps_per_execution.numpy()), seen[:4]]
        print("RESULT", json.dumps({"same": [weights[1] == weights[4], weights[1] == weights[32]],
                                    "calls": calls}))
    """)
    assert result["same"] == [True, True]
    assert result["calls"] == {"1": [1, [0, 1, 2, 3]], "4": [4, [3, 7, 9, 3]], "32": [32, [9, 9, 9]]}


def test_a_cluster_workers_stop_that_tensorflow_swallowed_ends_the_training_at_its_next_step(tmp_path):
    """A worker of a cluster raises Stopped from the signal handler at once (no step boundary agreed on);
    where that raise lands in Python code TensorFlow called back and swallowed (CI saw a worker train on
    for 15 s after SIGTERM, saving checkpoints, until the deadline ended it), its next step boundary stops
    it: stops.requested() is still set."""
    result = run_fresh(STEPS + textwrap.dedent(f"""
        class Steps(SeenSteps):
            def at(self, step):
                if step == [2, 3]:
                    try:
                        signal.raise_signal(signal.SIGTERM)
                    except stops.Stopped:
                        pass  # as TensorFlow's callbacks into Python swallow it

        steps = Steps()
        model = models.build(SPEC, INFO)
        built = callbacks.build(CONFIG, "{tmp_path}/run", "{tmp_path}/backup", 4, True, 5, False)
        stopped = None
        try:
            with stops.handling():  # a cluster's replica (components/trainer/executor.py train_replica)
                model.fit(data(16), steps_per_epoch=5, epochs=4, callbacks=[steps] + built, verbose=0)
        except stops.Stopped as exc:
            stopped = exc.signum
        print("RESULT", json.dumps({{"steps": steps.seen, "stopped": stopped}}))
    """))
    assert result["stopped"] == 15 and result["steps"][-1] == [2, 3], result


def test_backup_dir_is_stable_for_a_retry_and_new_for_new_work():
    from tfx.types import standard_artifacts

    from tfxd.components.trainer.executor import _backup_dir

    def dirs(config: str, examples_uri: str = "/r/Transform/transformed_examples/5"):
        examples, model = standard_artifacts.Examples(), standard_artifacts.Model()
        examples.uri, model.uri = examples_uri, "/r/Trainer/model/7"
        return _backup_dir({"examples": [examples]}, {"model": [model]}, {"custom_config": config})

    assert dirs('{"a": 1}') == dirs('{"a": 1}')
    assert dirs('{"a": 1}').startswith("/r/Trainer/.backup/")
    assert dirs('{"a": 2}') != dirs('{"a": 1}')
    assert dirs('{"a": 1}', "/r/Transform/transformed_examples/9") != dirs('{"a": 1}')


def test_every_model_type_builds_and_fits():
    result = run_fresh("""
        import json
        info = {"features": {"x": {"kind": "float", "shape": [], "cardinality": None},
                             "z": {"kind": "float", "shape": [], "cardinality": None},
                             "c": {"kind": "id", "shape": [], "cardinality": 5},
                             "big": {"kind": "id", "shape": [], "cardinality": 500},
                             "pixels": {"kind": "float", "shape": [64], "cardinality": None}},
                "label": {"name": "y", "task": "multiclass", "num_classes": 3}}
        rng = np.random.default_rng(0)
        features = {"x": rng.normal(size=(64, 1)).astype("float32"), "z": rng.normal(size=(64, 1)).astype("float32"),
                    "c": rng.integers(0, 5, size=(64, 1)), "big": rng.integers(0, 500, size=(64, 1)),
                    "pixels": rng.random(size=(64, 64)).astype("float32")}
        labels = rng.integers(0, 3, size=(64,))
        base = {"hidden_units": [8], "dropout": 0.1, "optimizer": {"name": "adam", "learning_rate": 0.01},
                "metrics": ["accuracy"], "cnn": {"image": {"feature": "pixels", "shape": [8, 8, 1]},
                                                 "filters": [4, 8], "kernel": 3, "dense": [8]}}
        from tensorflow.python.autograph.core import config
        shapes = {"keras_left_before": any(rule.matches("tf_keras") or rule.matches("tensorflow_transform")
                                           for rule in config.CONVERSION_RULES)}
        for kind in ("dnn", "wide_deep", "linear", "cnn"):
            model = models.build({"model": {**base, "type": kind}}, info)
            history = model.fit(features, labels, batch_size=16, epochs=1, verbose=0)
            shapes[kind] = [list(model.output_shape), round(float(model.optimizer.learning_rate), 4),
                            sorted(history.history)]
        binary = {"features": {"x": info["features"]["x"], "z": info["features"]["z"]},
                  "label": {"name": "y", "task": "binary", "num_classes": None}}
        custom = models.build({"model": {**base, "type": "custom",
                                         "builder": "tests.trainer_module.custom_model:build",
                                         "metrics": ["auc"]}}, binary)
        custom.fit({"x": features["x"], "z": features["z"]}, labels % 2, epochs=1, verbose=0)
        shapes["custom"] = [list(custom.output_shape), custom.loss.__class__.__name__]
        # building a model left Keras's and tf.Transform's own code to themselves: its fits traced Keras
        # without transpiling it, and so would its export's TransformFeaturesLayer
        shapes["keras_left_after"] = [sum(rule.matches(name) for rule in config.CONVERSION_RULES)
                                      for name in ("tf_keras", "tensorflow_transform")]
        # the builder compiled its model itself: the plan's steps per call are set on it all the same
        shapes["custom_steps_per_execution"] = int(models.build(
            {"model": {**base, "type": "custom", "builder": "tests.trainer_module.custom_model:build_compiled",
                       "metrics": ["auc"]}}, binary, 8).steps_per_execution.numpy())
        print("RESULT", json.dumps(shapes))
    """)
    for kind in ("dnn", "wide_deep", "linear", "cnn"):
        assert result[kind] == [[None, 3], 0.01, ["loss", "sparse_categorical_accuracy"]], kind
    assert result["custom"] == [[None, 1], "BinaryCrossentropy"]
    assert result["custom_steps_per_execution"] == 8
    assert result["keras_left_before"] is False and result["keras_left_after"] == [1, 1]


def test_steps_and_epochs_schedule():
    from tfxd.trainer_module.run_fn import schedule

    assert schedule({"steps": 1000, "epochs": None}, None, 40) == (10, 100)
    assert schedule({"steps": 7, "epochs": None}, None, 40) == (7, 1)
    assert schedule({"steps": None, "epochs": 3}, 12014, 40) == (3, 301)
    with pytest.raises(ValueError, match="use training.steps"):
        schedule({"steps": None, "epochs": 3}, None, 40)
