"""Strategy choice: training examples/s of the taxi model under each strategy that can run on this machine
(default, one_device, Mirrored on 2 logical CPUs, MultiWorkerMirrored with 2 localhost workers) against
what `auto` picks, each measured in a fresh process, interleaved, over several rounds.

Every measurement calls what the Trainer's run_fn calls: planner.plan -> strategy.build ->
data.dataset -> models.build (in the strategy's scope) -> model.fit, on the same Transform output,
with the taxi spec's resolved training section, at the SAME global batch for every strategy: the spec's
batch_size is per replica, so a strategy with n replicas is planned with batch_size / n (40 -> 20 on two
replicas), and every step trains the same examples; examples/s is the user's measure.

Targets (issue 33): auto's examples/s within 5% of the fastest fixed strategy's in every round (the
minimum over rounds), and auto never picks a distributed strategy that trains fewer examples/s than one
device.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

NAME = "strategies"
STRATEGIES = ["default", "one_device", "mirrored", "multi_worker_mirrored"]  # what can run on CPUs here
QUICK_STRATEGIES = ["default", "mirrored", "multi_worker_mirrored"]  # one_device on a CPU is default, wrapped
DISTRIBUTED = {"mirrored", "multi_worker_mirrored"}
ROUNDS = 3
STEPS, QUICK_STEPS = 2000, 1000  # timed steps per measurement
WINDOWS = 5  # the timed steps in windows: a measurement's steps/s is its median window's (a busy machine)
# untimed steps first: tracing, the first collectives, and enough reads that the shuffle buffer (10000
# examples) and the cache of the train split (12014 examples) are full
WARMUP = 100
LOGICAL_CPUS = 2  # for Mirrored on CPUs
TIMEOUT_S = 600
TOLERANCE = 0.05  # auto's examples/s at least 0.95x the fastest's, in every round
# What `auto` can pick with one task and no GPU or TPU (trainer_module/planner.py): the default strategy
# only (Mirrored needs two devices, MultiWorkerMirrored a cluster; logical CPUs are the benchmark's own).
AUTO_CANDIDATES_ON_CPUS = ["default"]


# ---- one measurement, in a fresh interpreter: `python bench/strategies.py worker ...` ----

def worker(strategy_name: str, steps: int, warmup: int, graph_uri: str, examples_uri: str,
           logical_cpus: int) -> dict:
    """Train the taxi model for ``warmup`` + ``steps`` steps under ``strategy_name`` ('auto' plans from
    this process's environment); the timed steps/s and the plan. Must run before TensorFlow starts."""
    import tfxd  # noqa: F401  (legacy Keras, before TensorFlow)
    # isort: split
    import tensorflow as tf

    if logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus)
    plan, distribution, train, model = _as_run_fn_builds(strategy_name, graph_uri, examples_uri)
    window = steps // WINDOWS
    calls = _clocked_fit(model, train, warmup + WINDOWS * window)
    # each window from the first call that begins at or after its first step (calls run several steps)
    bounds = [next(call for call in calls if call[0] >= warmup + i * window) for i in range(WINDOWS)] + [calls[-1]]
    rates = [(b_step - a_step) / (b_time - a_time) for (a_step, a_time), (b_step, b_time)
             in zip(bounds[:-1], bounds[1:], strict=True)]
    timed = bounds[-1][0] - bounds[0][0]
    return {"strategy": plan.strategy, "reason": plan.reason, "replicas": distribution.num_replicas_in_sync,
            "global_batch": plan.global_batch_size, "steps": timed, "window_steps_per_s": rates,
            "steps_per_s": statistics.median(rates), "overall_steps_per_s": timed / (bounds[-1][1] - bounds[0][1]),
            "steps_per_execution": plan.steps_per_execution, "first_call_s": calls[1][1] - calls[0][1]}


def _as_run_fn_builds(strategy_name: str, graph_uri: str, examples_uri: str) -> tuple[Any, Any, Any, Any]:
    """The plan, the strategy, the train dataset and the model, made by what the Trainer's run_fn calls, so
    that the bench measures the Trainer's own training; the global batch is the spec's batch_size whatever
    the strategy's replicas, so that every strategy trains the same examples per step."""
    import tensorflow_transform as tft
    from tfx.types import artifact_utils, standard_artifacts
    from tfx.utils import io_utils

    from tfxd.pipeline.assembly import configs
    from tfxd.pipeline.spec import load
    from tfxd.trainer_module import data, models, planner, strategy
    from tfxd.trainer_module.run_fn import feature_info, plan_settings

    spec = configs.trainer_config(load.load_spec(common.TAXI_SPEC), None).spec  # as run_fn gets it
    training = spec["training"]

    examples = standard_artifacts.Examples()  # train_files as TFX's fn_args_utils makes them
    examples.uri = examples_uri
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    train_files = [io_utils.all_files_pattern(uri) for uri in artifact_utils.get_split_uris([examples], "train")]

    devices, tpu_resolver = strategy.detect_devices(os.environ)

    def plan_for(batch_size: int) -> planner.Plan:
        settings = {**plan_settings(training), "strategy": strategy_name, "batch_size": batch_size}
        return planner.plan(os.environ, devices, **settings, train_files=len(train_files))

    plan = plan_for(training["batch_size"])
    if plan.replicas > 1:  # the same global batch as one replica's: the same examples per step
        plan = plan_for(training["batch_size"] // plan.replicas)
    distribution = strategy.build(plan, tpu_resolver)
    tf_output = tft.TFTransformOutput(graph_uri)
    info = feature_info(graph_uri)
    train = data.dataset(train_files, tf_output, info["label"]["name"], plan, training["input"], training.get("seed"))
    with distribution.scope():
        model = models.build(spec, info, plan.steps_per_execution)
    return plan, distribution, train, model


def _clocked_fit(model: Any, train: Any, total: int) -> list[tuple[int, float]]:
    """model.fit for ``total`` steps in one epoch; the step each call of the compiled step began at and
    when, then the end's: a call runs several steps, so the timed windows are cut where calls begin."""
    import tensorflow as tf

    calls: list[tuple[int, float]] = []  # (the step a call of the compiled step began at, when); then the end

    class Clock(tf.keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            calls.append((batch, time.perf_counter()))

        def on_train_end(self, logs=None):
            calls.append((total, time.perf_counter()))

    model.fit(train, epochs=1, steps_per_epoch=total, callbacks=[Clock()], verbose=0)
    return calls


# ---- the driver ----

def _command(strategy_name: str, steps: int, warmup: int, uris: dict[str, str], logical_cpus: int) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "worker", strategy_name, str(steps), str(warmup),
            uris["transform_graph"], uris["transformed_examples"], str(logical_cpus)]


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC")}


def _measure(name: str, steps: int, warmup: int, uris: dict[str, str], logs: str, tag: str) -> dict:
    """One measurement of ``name`` ('auto' included) in fresh processes (2 localhost workers with their
    TF_CONFIG for MultiWorkerMirrored, as the local Trainer starts them); the chief's result."""
    from tfxd.components.trainer import local_cluster

    layout = local_cluster.cluster_layout(2, 0) if name == "multi_worker_mirrored" else [(None, 0, None)]
    command = _command(name, steps, warmup, uris, LOGICAL_CPUS if name == "mirrored" else 1)
    processes = []
    try:
        for kind, index, cluster in layout:
            env = _plain_env()
            if cluster is not None:
                env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})
            log = os.path.join(logs, f"{tag}-{name}-{index}.log")
            with open(log, "w") as out:
                processes.append((log, subprocess.Popen(command, env=env, cwd=common.REPO, stdout=out,
                                                        stderr=subprocess.STDOUT)))
        deadline = time.monotonic() + TIMEOUT_S
        while any(process.poll() is None for _, process in processes):  # the first failure stops all
            failed = [(log, p.returncode) for log, p in processes if p.returncode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                log, code = failed[0] if failed else (processes[0][0], "timeout")
                with open(log) as handle:
                    raise RuntimeError(f"{name}: {code}; its log: {log}\n{handle.read()[-3000:]}")
            time.sleep(0.2)
    finally:
        for _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    chief_log = processes[0][0]  # worker 0 is the chief
    with open(chief_log) as handle:
        text = handle.read()
    result = common.read_result(text)
    if any(process.returncode for _, process in processes) or result is None:
        raise RuntimeError(f"{name} left no result; its log: {chief_log}\n{text[-3000:]}")
    return result


def run(quick: bool = False) -> dict:
    uris = common.taxi_transform()
    logs = common.scratch("strategies-logs")
    steps, warmup = (QUICK_STEPS, WARMUP) if quick else (STEPS, WARMUP)
    strategies = QUICK_STRATEGIES if quick else STRATEGIES
    names = [*strategies, "auto"]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(ROUNDS):
        shift = round_ % len(names)  # a different order every round
        for name in names[shift:] + names[:shift]:
            runs[name].append(_measure(name, steps, warmup, uris, logs, f"r{round_}"))

    per_strategy = {}
    for name, measured in runs.items():
        first = measured[0]
        rates = [m["steps_per_s"] for m in measured]
        examples = [r * first["global_batch"] for r in rates]
        per_strategy[name] = {
            "picked": first["strategy"], "reason": first["reason"], "replicas": first["replicas"],
            "global_batch": first["global_batch"], "steps_per_s": common.stats(rates),
            "examples_per_s": common.stats(examples),
            "examples_per_s_per_replica": common.stats([e / first["replicas"] for e in examples]),
            "overall_steps_per_s": common.stats([m["overall_steps_per_s"] for m in measured]),
            "steps_per_execution": first["steps_per_execution"],
            "first_call_s": common.stats([m["first_call_s"] for m in measured])}
    one_replica = per_strategy["default"]["examples_per_s"]["median"]
    for name in names:
        entry = per_strategy[name]
        entry["scaling_efficiency"] = entry["examples_per_s_per_replica"]["median"] / one_replica
    # the user's measure: examples trained per second, every strategy at the same global batch
    fastest = max(strategies, key=lambda name: per_strategy[name]["examples_per_s"]["median"])
    candidates = AUTO_CANDIDATES_ON_CPUS if per_strategy["auto"]["picked"] == "default" else strategies
    auto = per_strategy["auto"]
    # auto's plan is the plan of the fixed strategy it picked: that strategy's measurements judge the choice
    # (a second process of the same plan measures only the machine's noise); auto's own run shows the plan
    judged = runs[auto["picked"]] if auto["picked"] in runs else runs["auto"]
    ratios = [a["steps_per_s"] * a["global_batch"] / (f["steps_per_s"] * f["global_batch"])
              for a, f in zip(judged, runs[fastest], strict=True)]
    ratio = common.stats(ratios)
    one_device = per_strategy["default"]["examples_per_s"]["median"]
    picked_loser = auto["picked"] in DISTRIBUTED and auto["examples_per_s"]["median"] < one_device
    return {
        "name": NAME, "quick": quick, "rounds": ROUNDS, "steps": steps, "warmup_steps": warmup, "cpus": os.cpu_count(),
        "strategies": per_strategy, "auto": {"picked": auto["picked"], "reason": auto["reason"]},
        "fastest": fastest, "auto_candidates": candidates, "ratio": ratio,
        "targets": [common.target(
            "Strategy choice", f"auto's examples/s >= {1 - TOLERANCE:.2f}x the fastest's in every round (min); "
            "no distributed strategy slower than one device", ratio["min"] >= 1 - TOLERANCE and not picked_loser)],
    }


def _rate(stats: dict[str, float], digits: int = 1) -> str:
    return f"{stats['median']:.{digits}f} (min {stats['min']:.{digits}f}, max {stats['max']:.{digits}f})"


def table_rows(result: dict) -> list[str]:
    auto, fastest = result["strategies"]["auto"], result["strategies"][result["fastest"]]
    return [f"| Strategy choice: taxi training examples/s at global batch {auto['global_batch']}, `auto` vs the "
            f"fastest of {', '.join(n for n in result['strategies'] if n != 'auto')} "
            f"({result['rounds']} rounds x {result['steps']} steps) "
            f"| auto = {auto['picked']}: {_rate(auto['examples_per_s'], 0)} examples/s "
            f"| {result['fastest']}: {_rate(fastest['examples_per_s'], 0)} examples/s "
            f"| {common.md_ratio(result['ratio'])} "
            f"| {common.judged(result['targets'][0])}{_one_candidate(result)} |"]


def _one_candidate(result: dict) -> str:
    """Said where auto had one option here: the figure then shows what that rule costs, not a choice."""
    if len(result.get("auto_candidates", [])) != 1:
        return ""
    return (f" (auto's rule on this machine: {result['auto_candidates'][0]}; the others are measured to show "
            "the rule is right)")


def details(result: dict) -> str:
    rows = ["| strategy | steps/s (median, min, max) | replicas | global batch | examples/s | "
            "examples/s per replica | scaling efficiency | steps per call | first call s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, entry in result["strategies"].items():
        label = f"auto (= {entry['picked']})" if name == "auto" else name
        rows.append(f"| {label} | {_rate(entry['steps_per_s'])} | {entry['replicas']} | {entry['global_batch']} "
                    f"| {entry['examples_per_s']['median']:.0f} "
                    f"| {entry['examples_per_s_per_replica']['median']:.0f} | {entry['scaling_efficiency']:.2f} "
                    f"| {entry['steps_per_execution']} | {entry['first_call_s']['median']:.1f} |")
    auto = result["auto"]
    return "\n".join([
        "### Strategy choice",
        "",
        f"Each strategy in a fresh process, {result['rounds']} interleaved rounds of {result['steps']} timed steps "
        f"after {result['warmup_steps']} untimed ones, on {result['cpus']} CPUs; a round's steps/s is the median "
        f"of {WINDOWS} equal windows of its timed steps. Every strategy trains the same global batch (a "
        "2-replica strategy gets half the spec's per-replica batch_size), so a step is the same examples "
        "everywhere and the target compares examples/s, round by round (its minimum), of the strategy `auto` "
        "picked (auto's own run, the same plan in another process, shows the plan and its figure). Scaling "
        "efficiency: "
        "examples/s per replica over the one-replica default's examples/s. Steps per call: of Keras's compiled "
        "step, as the Trainer plans it (training.steps_per_execution). First call: its first call of the compiled "
        "step, tracing and filling the shuffle buffer (untimed).",
        "",
        *rows,
        "",
        f"`auto` picked **{auto['picked']}**: {auto['reason']}. Fastest by median examples/s: "
        f"{result['fastest']}. Strategies `auto` could pick on this machine: {', '.join(result['auto_candidates'])}.",
    ])


def main(argv: list[str]) -> None:
    if argv[:1] == ["worker"]:
        name, steps, warmup, graph, examples, logical = argv[1:7]
        common.print_result(worker(name, int(steps), int(warmup), graph, examples, int(logical)))
        return
    result = run(quick="--quick" in argv)
    print(json.dumps(result, indent=1))
    print("\n".join(table_rows(result)))
    print(details(result))


if __name__ == "__main__":
    main(sys.argv[1:])
