"""The Evaluator like for like: tfxd's Evaluator against TFX's, each judging its own taxi pipeline's model on
its own eval split and asked for the same figures: binary accuracy over the whole split, as TFX's taxi
example asks (its EvalConfig as shipped, TFMA's default metrics on), and as tfxd's taxi spec asks with
`evaluation.metrics: [binary_accuracy]` and `evaluation.slices: [[]]`. The end-to-end table's component
seconds compare the two Evaluators as each example configures them, which is not like for like: tfxd's taxi
spec asks for binary accuracy and AUC over the whole split and 24 trip_start_hour slices.

Each side runs the Evaluator execution its pipeline recorded in ML Metadata again, in a fresh process, into
a fresh folder, on the in-process Beam runner, and times the executor's Do (model loading, TFMA's Beam
pipeline, the outputs written; not the imports). The sides alternate, >= 3 rounds. The taxi spec as shipped
is timed beside them, and once more with AUC at TFMA's default thresholds (10,000) instead of Keras' 200:
what the spec's own figures cost, and what the thresholds moved.

Target (issue 65): tfxd's Evaluator at half TFX's cost or below on the same figures (ratio <= 0.5; issue 19's
was 1.0). tfxd's executor mends Beam itself (tfxd.direct_runner.BeamMendedExecutor), so the worker times
what a run or a cluster's task runs.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import e2e_taxi  # noqa: E402

NAME = "evaluator"
ROUNDS = 3
TARGET = 0.5
TIMEOUT_S = 600
# side -> (whose pipeline and executor, what it is asked for: the recorded EvalConfig unless said)
SIDES = {
    "tfx": "TFX's Evaluator, TFX's taxi EvalConfig as shipped",
    "tfxd": "tfxd's Evaluator, the taxi spec asking for TFX's figures",
    "tfxd_spec": "tfxd's Evaluator, the taxi spec as shipped",
    "tfxd_spec_tfma_auc": "tfxd's Evaluator, the taxi spec as shipped with AUC at TFMA's default thresholds",
}
SAME_FIGURES = ["evaluation.metrics=[binary_accuracy]", "evaluation.slices=[[]]"]


# ---- the worker: one Evaluator execution again, timed ----

def _recorded(metadata_db: str) -> tuple[dict, dict]:
    """The inputs and execution properties of the newest Evaluator execution in ``metadata_db``."""
    from ml_metadata.proto import metadata_store_pb2
    from tfx.types import artifact_utils

    found = e2e_taxi.store(metadata_db)
    (context,) = [c for c in found.get_contexts_by_type("node") if c.name.endswith(".Evaluator")]
    execution = found.get_executions_by_context(context.id)[-1]
    types = {t.id: t for t in found.get_artifact_types()}
    inputs: dict[str, list] = {}
    for event in found.get_events_by_execution_ids([execution.id]):
        if event.type == metadata_store_pb2.Event.INPUT:
            (artifact,) = found.get_artifacts_by_id([event.artifact_id])
            inputs.setdefault(event.path.steps[0].key, []).append(
                artifact_utils.deserialize_artifact(types[artifact.type_id], artifact))
    properties = {name: getattr(value, kind) for name, value in execution.custom_properties.items()
                  if (kind := value.WhichOneof("value")) in ("string_value", "int_value", "double_value")}
    return inputs, properties


def _eval_config(side: str, recorded: str) -> str:
    """The EvalConfig (TFX's JSON) ``side`` is asked for."""
    from tfx.utils import proto_utils

    if side == "tfxd":
        from tfxd.pipeline.assembly.evaluation import eval_config
        from tfxd.pipeline.spec.load import load_spec

        return proto_utils.proto_to_json(eval_config(load_spec(common.TAXI_SPEC, SAME_FIGURES).spec))
    if side == "tfxd_spec_tfma_auc":
        config = json.loads(recorded)
        for spec in config["metrics_specs"]:
            for metric in spec["metrics"]:
                if metric["class_name"] == "AUC":
                    metric["config"] = json.dumps({k: v for k, v in json.loads(metric["config"]).items()
                                                   if k != "num_thresholds"})
        return json.dumps(config)
    return recorded


def worker(side: str, metadata_db: str) -> dict:
    import tfxd  # noqa: F401  (legacy Keras, before TensorFlow)
    # isort: split
    from tfx.components.evaluator.executor import Executor as TfxExecutor
    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
    from tfx.types import standard_artifacts
    from tfx.types import standard_component_specs as keys

    from tfxd.components.evaluator.executor import Executor as TfxdExecutor
    from tfxd.components.evaluator.slices import metrics_per_slice
    from tfxd.pipeline.assembly.beam_args import direct_args

    inputs, properties = _recorded(metadata_db)
    properties[keys.EVAL_CONFIG_KEY] = _eval_config(side, properties[keys.EVAL_CONFIG_KEY])
    out = common.scratch(f"evaluator/out-{side}")
    evaluation, blessing = standard_artifacts.ModelEvaluation(), standard_artifacts.ModelBlessing()
    for artifact, name in ((evaluation, "evaluation"), (blessing, "blessing")):
        artifact.uri = os.path.join(out, name)
        os.makedirs(artifact.uri)
    executor = (TfxExecutor if side == "tfx" else TfxdExecutor)(BaseBeamExecutor.Context(
        beam_pipeline_args=direct_args("in_memory", 1), tmp_dir=os.path.join(out, "tmp"), unique_id="bench"))
    start = time.perf_counter()
    executor.Do(inputs, {keys.EVALUATION_KEY: [evaluation], keys.BLESSING_KEY: [blessing]}, properties)
    seconds = time.perf_counter() - start
    slices = metrics_per_slice(evaluation.uri)
    return {"side": side, "seconds": seconds, "slices": len(slices), "overall": slices[0]["metrics"],
            "blessing": sorted(os.listdir(blessing.uri))}


# ---- the driver ----

def _measure(side: str, metadata_db: str, log: str) -> dict:
    return common.run_worker(__file__, [side, metadata_db], log, TIMEOUT_S)


def _pipelines(quick: bool) -> dict[str, str]:
    """Both taxi pipelines run once (TFX's with tfxd's Beam flags, the faster way to the same artifacts):
    side -> its ML Metadata store."""
    root = common.scratch("evaluator/tfxd-root")
    overrides = ["--set", f"root={root}", *(["--set", "training.steps=200"] if quick else [])]
    common.measure([common.TFXD, "run", common.TAXI_SPEC, *overrides], cwd=common.REPO,
                   log=os.path.join(common.scratch("evaluator/logs"), "tfxd-run.log"))
    tfx = e2e_taxi.run_tfx(e2e_taxi.tfx_example_dir(), 0, control=True, folder="evaluator/tfx-home")
    tfxd_db = os.path.join(root, "metadata.sqlite")
    return {side: tfx["metadata_db"] if side == "tfx" else tfxd_db for side in SIDES}


def run(quick: bool = False) -> dict:
    stores = _pipelines(quick)
    logs = common.scratch("evaluator/logs", fresh=False)
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for index in range(1 if quick else ROUNDS):
        for side in SIDES:
            runs[side].append(_measure(side, stores[side], os.path.join(logs, f"{side}-{index}.log")))
        print(f"  round {index + 1}: " + ", ".join(f"{side} {runs[side][-1]['seconds']:.2f} s" for side in SIDES),
              flush=True)
    ratio = common.stats([a["seconds"] / b["seconds"] for a, b in zip(runs["tfxd"], runs["tfx"], strict=True)])
    return {"name": NAME, "quick": quick, "runs": runs,
            "seconds": {side: common.stats([r["seconds"] for r in runs[side]]) for side in SIDES},
            "ratio": ratio,
            "targets": [common.target("Evaluator like for like", f"ratio <= {TARGET}", ratio["median"] <= TARGET)]}


def table_rows(result: dict) -> list[str]:
    a, b = result["seconds"]["tfxd"], result["seconds"]["tfx"]
    return [f"| Evaluator like for like: tfxd's vs TFX's, each on its own taxi model and eval split, binary "
            f"accuracy over the whole split ({len(result['runs']['tfx'])} alternating rounds; seconds in Do) "
            f"| {a['median']:.2f} s (min {a['min']:.2f}, max {a['max']:.2f}) "
            f"| {b['median']:.2f} s (min {b['min']:.2f}, max {b['max']:.2f}) "
            f"| {common.md_ratio(result['ratio'])} | {common.judged(result['targets'][0])} |"]


def details(result: dict) -> str:
    runs, seconds = result["runs"], result["seconds"]
    lines = ["| side | slices | median s (min, max) | overall figures (last round) |", "|---|---|---|---|"]
    for side, words in SIDES.items():
        last, s = runs[side][-1], seconds[side]
        figures = ", ".join(f"{name} {value:.5f}" for name, value in sorted(last["overall"].items()))
        lines.append(f"| {words} | {last['slices']} | {s['median']:.2f} ({s['min']:.2f}, {s['max']:.2f}) "
                     f"| {figures} |")
    auc = [runs[side][-1]["overall"].get("auc") for side in ("tfxd_spec", "tfxd_spec_tfma_auc")]
    moved = (f" (taxi's AUC {auc[0]:.5f} with Keras' 200 thresholds, {auc[1]:.5f} with TFMA's 10,000)"
             if None not in auc else "")
    return "\n".join([
        "### Evaluator", "",
        *lines, "",
        "Each side runs its pipeline's recorded Evaluator execution again in a fresh process, on the in-process "
        "Beam runner, timed around the executor's Do (model loading, TFMA's Beam pipeline, outputs written). "
        "tfxd's side adds example_count, as tfxd always does. What moved the figure: the end-to-end table "
        "had tfxd's Evaluator at 5.2 s against the control's 3.4 s (bench/RESULTS.md of 2026-11-25), the two "
        f"asked for different figures. Asked for the same figures, it takes {result['ratio']['median']:.2f} of "
        "TFX's time; the rest was the taxi spec "
        "asking for AUC over 25 slices, at TFMA's default of 10,000 thresholds, whose confusion matrices TFMA "
        "builds in Python for every slice (py-spy: calibration_histogram.rebin and binary_confusion_matrices' "
        "derived result, once a slice). tfxd now asks TFMA for Keras' 200 thresholds, the Trainer's own, "
        f"so the Evaluator's AUC is the one the Trainer logs{moved}. Round four (issue 65, 0.90 before): "
        "the executor mends Beam itself, as a local run did for it (signatures read once, option views made "
        "once, no in-memory state cache weighing every side input with objsize: a quarter of its Do), TFMA "
        "loads the model as a plain SavedModel (tf_generic: the same signatures, half tf_keras' load), and the "
        "examples are read a gzipped file at a time; TFMA's five results are written in one stage each (20 "
        "stages, where Beam's sharded writes made 35: components/evaluator/result_files.py), and its call of "
        "the model's signature by position is made by name, without the TypeError TensorFlow formatted for "
        "every batch before its fallback (components/evaluator/signature_calls.py). What remains is mostly "
        "one stage: reading, the model's inference and TFMA's per-example Python (unbatching, each metric's "
        "add_input).",
    ])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        common.print_result(worker(sys.argv[2], sys.argv[3]))
    else:
        outcome = run(quick="--quick" in sys.argv)
        print("\n".join(table_rows(outcome)))
        print(details(outcome))
