"""Input pipeline: examples/s of the Trainer's input function (trainer_module/data.py) over the taxi
example's transformed examples, against the plain tf.data read of the same files that TensorFlow's
tf.data performance guide writes (GZIP TFRecordDatasets interleaved in parallel, shuffled serialized
records, batched tf.io.parse_example, prefetch).

Each run is a fresh interpreter that builds every side's pipeline and reads them in turn, read after
read, the order rotating each round, so that both sides of a ratio see the same process, the same
moment's machine and the same TensorFlow runtime: the ratio of a run is the two sides' examples/s in it
(each side's the median of its reads: one read disturbed by another process does not make the run's
figure), and the runs repeat it. The headline compares like with like: tfxd with `training.input.cache: false` against the plain read,
neither caching. Outside quick mode four more sides follow each pair: tfxd with its defaults (cache on)
against the plain read with the same cache (serialized records, before the shuffle), the plain read
without its shuffle, and the plain read with its files read in sequence (no parallel interleave: what
one writes who knows that a parallel interleave hands records between threads one at a time). The tfxd
side is built as the Trainer's run_fn builds it: TFX's fn_args_utils.get_common_fn_args (train files
and data accessor), planner.plan, the taxi spec's resolved `training.input` (its defaults: cache on),
data.dataset. Both sides read the same files at the spec's batch size. A run reads what the taxi training
reads three times over (3 x training.steps batches: a fresh pipeline's tf.data autotuning warm-up is then a
small part of a read, where reads of training.steps batches varied by +-12% on either side within one
process) from a freshly built pipeline, several times: a tf.function
calls next() on the iterator, as Keras's train step does; the first read is an untimed warm-up.

Targets (issue 33): the input function reads at least 1.0x the plain read's examples/s, cache off on both
(median over the runs), and no run below 0.9x.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

NAME = "input_pipeline"
PAIRS, QUICK_PAIRS = 7, 2  # runs, each measuring every side
READS, QUICK_READS = 4, 2  # timed reads per side and run, each of READ_STEPS x training.steps batches, freshly built
READ_STEPS = 3
TARGET, TARGET_MIN = 1.0, 0.9
TIMEOUT_S = 600
# tfxd_nocache: training.input.cache=false; tfxd: the spec's defaults (cache on); plain_cache: the plain read
# caching its serialized records as tfxd does; plain_noshuffle: the plain read without its shuffle;
# plain_sequential: the plain read with its files read one after another in the reading thread
SIDES = ["tfxd_nocache", "plain", "tfxd", "plain_cache", "plain_noshuffle", "plain_sequential"]
QUICK_SIDES = ["tfxd_nocache", "plain"]


# ---- one measurement, in a fresh interpreter: `python bench/input_pipeline.py worker ...` ----

def plain_dataset(files: list[str], feature_spec: dict, label: str, batch: int, shuffle_buffer: int,
                  cache: bool = False, parallel_reads: bool = True):
    """What one would hand-write for the same job, as TensorFlow's tf.data performance guide writes it:
    every file interleaved (in parallel unless ``parallel_reads`` is False), serialized records (cached
    in memory when ``cache``) shuffled (a fresh order every epoch), repeated, batched, parsed a batch at a
    time, the label popped."""
    import tensorflow as tf

    names = tf.data.Dataset.list_files(files, shuffle=True)
    parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": False} if parallel_reads else {}
    records = names.interleave(lambda name: tf.data.TFRecordDataset(name, compression_type="GZIP"),
                               **parallel)
    if cache:
        records = records.cache()
    if shuffle_buffer:
        records = records.shuffle(shuffle_buffer)
    records = records.repeat().batch(batch, drop_remainder=True)

    def parse(serialized):
        features = tf.io.parse_example(serialized, feature_spec)
        return features, features.pop(label)

    return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def worker(sides: list[str], reads: int, graph_uri: str, examples_uri: str) -> dict[str, dict]:
    """Read READ_STEPS x training.steps batches of each side's dataset over the train split, ``reads`` + 1 times per
    side, each from a freshly built dataset, the sides in turn (rotating); the first round is untimed."""
    import tfxd  # noqa: F401  (legacy Keras, before TensorFlow)
    # isort: split
    from tfxd.trainer_module import data

    training, fn_args, plan, tf_output, label = _as_the_trainer_reads(graph_uri, examples_uri)
    steps = READ_STEPS * training["steps"]

    def inputs(side: str) -> dict:
        # the cache as each side asks: off, or on whatever the files' size (the spec's default, auto, is on here)
        return {**training["input"], "cache": side != "tfxd_nocache"}

    def build(side: str):
        input_spec = inputs(side)
        if side.startswith("plain"):
            return plain_dataset(fn_args.train_files, tf_output.transformed_feature_spec(), label,
                                 plan.global_batch_size, 0 if side == "plain_noshuffle" else input_spec["shuffle_buffer"],
                                 cache=side == "plain_cache", parallel_reads=side != "plain_sequential")
        return data.dataset(fn_args.train_files, tf_output, label, plan, input_spec,
                            training.get("seed"))

    totals, per_read = _timed_reads(build, sides, reads, steps)
    # a side's rate in a run: the median of its reads, so that one read the machine disturbed (a second of
    # another process) does not make the run's figure
    return {side: {"side": side, "reads": reads, "batches_per_read": steps, "examples": read, "seconds": seconds,
                   "examples_per_s": statistics.median(per_read[side]), "reads_examples_per_s": per_read[side],
                   "cpu_us_per_example": cpu / read * 1e6,
                   "batch_size": plan.global_batch_size, "strategy": plan.strategy, "input": inputs(side),
                   "train_files": fn_args.train_files}
            for side, (read, seconds, cpu) in totals.items()}


def _as_the_trainer_reads(graph_uri: str, examples_uri: str) -> tuple[dict, Any, Any, Any, str]:
    """What the tfxd side is built from, made as the Trainer's executor and run_fn make it, so that the bench
    measures the Trainer's own input: the taxi spec's resolved training section, TFX's fn_args over
    Transform's output artifacts (train files, data accessor), the plan, Transform's output and the label."""
    import tensorflow_transform as tft
    from tfx.components.trainer import fn_args_utils
    from tfx.types import artifact_utils, standard_artifacts

    from tfxd.pipeline.spec import load
    from tfxd.trainer_module import planner
    from tfxd.trainer_module.run_fn import feature_info

    training = load.load_spec(common.TAXI_SPEC).spec.model_dump(mode="json")["training"]
    examples = standard_artifacts.Examples()  # Transform's output artifact, as the Trainer's executor gets it
    examples.uri = examples_uri
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    examples.set_string_custom_property("payload_format", "FORMAT_TF_EXAMPLE")
    graph = standard_artifacts.TransformGraph()
    graph.uri = graph_uri
    fn_args = fn_args_utils.get_common_fn_args({"examples": [examples], "transform_graph": [graph]},
                                               {"train_args": "{}", "eval_args": "{}"})
    plan = planner.plan({}, planner.Devices(), batch_size=training["batch_size"],
                        train_files=len(fn_args.train_files))
    tf_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    label = feature_info(fn_args.transform_graph_path)["label"]["name"]
    return training, fn_args, plan, tf_output, label


def _timed_reads(build: Callable[[str], Any], sides: list[str], reads: int,
                 steps: int) -> tuple[dict[str, list], dict[str, list[float]]]:
    """Each side's examples, seconds and CPU seconds over its timed reads, and each timed read's
    examples/s: ``reads`` + 1 rounds, the sides in turn (the order rotating, so that no side always follows
    the same one), each read ``steps`` batches from a freshly built pipeline (a fresh cache, shuffle buffer
    and readers), as Keras's train step reads them: a tf.function calling next()."""
    import tensorflow as tf

    @tf.function
    def drain(iterator, batches):
        examples = tf.constant(0, tf.int64)
        for _ in tf.range(batches):
            _, labels = next(iterator)
            examples += tf.shape(labels, out_type=tf.int64)[0]
        return examples

    totals = {side: [0, 0.0, 0.0] for side in sides}  # examples, seconds, CPU seconds
    per_read: dict[str, list[float]] = {side: [] for side in sides}  # each timed read's examples/s
    for round_ in range(reads + 1):  # the first is a warm-up: tracing, TensorFlow's first runs, the file cache
        shift = round_ % len(sides)
        for side in sides[shift:] + sides[:shift]:
            dataset = build(side)  # a fresh pipeline each time: fresh cache, shuffle buffer, readers
            start, cpu_start = time.perf_counter(), time.process_time()
            examples = int(drain(iter(dataset), tf.constant(steps)))
            if round_:
                seconds = time.perf_counter() - start
                total = totals[side]
                total[0] += examples
                total[1] += seconds
                total[2] += time.process_time() - cpu_start
                per_read[side].append(examples / seconds)
    return totals, per_read


# ---- the driver ----

def _measure(sides: list[str], reads: int, uris: dict[str, str], log: str) -> dict[str, dict]:
    return common.run_worker(__file__, [",".join(sides), str(reads), uris["transform_graph"],
                                        uris["transformed_examples"]], log, TIMEOUT_S)


def run(quick: bool = False) -> dict:
    uris = common.taxi_transform()
    logs = common.scratch("input-pipeline")
    pairs, reads = (QUICK_PAIRS, QUICK_READS) if quick else (PAIRS, READS)
    sides = QUICK_SIDES if quick else SIDES
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for index in range(pairs):
        order = sides if index % 2 == 0 else [sides[1], sides[0], *sides[2:]]  # alternate who goes first
        measured = _measure(order, reads, uris, os.path.join(logs, f"{index}.log"))
        for side in sides:
            runs[side].append(measured[side])
    rates = {side: [r["examples_per_s"] for r in measured] for side, measured in runs.items()}
    ratios = [a / b for a, b in zip(rates["tfxd_nocache"], rates["plain"], strict=True)]
    first = runs["tfxd_nocache"][0]
    result = {
        "name": NAME,
        "pairs": pairs,
        "reads_per_run": reads,
        "batches_per_read": first["batches_per_read"],
        "batch_size": first["batch_size"],
        "strategy": first["strategy"],
        "input": first["input"],
        "train_files": first["train_files"],
        "examples_per_run": {side: [r["examples"] for r in measured] for side, measured in runs.items()},
        "examples_per_s": {side: common.stats(values) for side, values in rates.items()},
        "runs_examples_per_s": rates,
        "reads_examples_per_s": {side: [r["reads_examples_per_s"] for r in measured] for side, measured in runs.items()},
        "cpu_us_per_example": {side: common.stats([r["cpu_us_per_example"] for r in measured])
                               for side, measured in runs.items()},
        "ratio": common.stats(ratios),
        "ratios": ratios,
        "targets": [common.target(
            "Input pipeline", f"tfxd >= {TARGET} x plain read (median), >= {TARGET_MIN} x in every run, cache off "
            "on both", common.stats(ratios)["median"] >= TARGET and min(ratios) >= TARGET_MIN)],
    }
    if "plain_cache" in runs:
        result["ratio_cached"] = common.stats(
            [a / b for a, b in zip(rates["tfxd"], rates["plain_cache"], strict=True)])
    if "plain_noshuffle" in runs:
        result["ratio_noshuffle"] = common.stats(
            [a / b for a, b in zip(rates["tfxd"], rates["plain_noshuffle"], strict=True)])
    if "plain_sequential" in runs:
        result["ratio_sequential"] = common.stats(
            [a / b for a, b in zip(rates["tfxd_nocache"], rates["plain_sequential"], strict=True)])
    return result


def _rate(stats: dict[str, float]) -> str:
    return f"{stats['median']:,.0f} ex/s (min {stats['min']:,.0f}, max {stats['max']:,.0f})"


def table_rows(result: dict) -> list[str]:
    rates = result["examples_per_s"]
    return [f"| Input pipeline: Trainer input fn vs plain tf.data read, taxi transformed examples, batch "
            f"{result['batch_size']}, no cache on either side ({result['pairs']} runs, both sides in each) "
            f"| {_rate(rates['tfxd_nocache'])} | {_rate(rates['plain'])} | {common.md_ratio(result['ratio'])} "
            f"| {common.judged(result['targets'][0])} |"]


def details(result: dict) -> str:
    inp = result["input"]
    lines = [
        "### Input pipeline",
        "",
        f"Both sides read `{result['train_files'][0]}` (the taxi example's Transform output, train split, "
        f"GZIP TFRecords of tf.Example) at batch {result['batch_size']} (strategy `{result['strategy']}`), "
        f"{result['pairs']} runs, each a fresh interpreter that reads every side in turn, the order rotating "
        f"each round. A run builds each side's dataset {result['reads_per_run'] + 1} times and reads {result['batches_per_read']} batches "
        f"({READ_STEPS} x the spec's training.steps) from each through a tf.function calling next() on its iterator, as "
        "Keras's train step does; the first read is an untimed warm-up (tracing, TensorFlow's first runs), "
        "the others are timed from the iterator's creation (file opening, shuffle buffer fill and the "
        "cache's first epoch included). A side's rate in a run is the median of its reads' examples/s (one "
        "read slowed by another process on the machine does not make the run's figure). A run's ratio "
        "compares the two sides within that run (the same process and moment); the target asks the median "
        "over runs and the least of them.",
        "",
        f"- tfxd_nocache: `tfxd.trainer_module.data.dataset` as run_fn calls it, with the spec's "
        f"`training.input` and cache off: parallel_reads={inp['parallel_reads']} (local files: read in "
        f"sequence), shuffle_buffer={inp['shuffle_buffer']}, prefetch={inp['prefetch']}.",
        f"- plain: interleaved TFRecordDataset, shuffle({inp['shuffle_buffer']}) of serialized records, repeat, "
        "batch, `tf.io.parse_example` with Transform's feature spec (map, AUTOTUNE), prefetch(AUTOTUNE); "
        "no cache.",
        "- tfxd: the spec's defaults (cache on: after the first epoch its serialized records come from memory, "
        "every batch still parsed); plain_cache: the plain read caching its serialized records the same way; "
        "plain_noshuffle: the plain read without its shuffle (less work than training needs); "
        "plain_sequential: the plain read with `interleave` left sequential (no num_parallel_calls).",
        "",
        "| run | " + " | ".join(result["runs_examples_per_s"]) + " | ratio tfxd_nocache/plain |",
        "|---|" + "---|" * (len(result["runs_examples_per_s"]) + 1),
    ]
    for index, ratio in enumerate(result["ratios"]):
        rates = " | ".join(f"{values[index]:,.0f}" for values in result["runs_examples_per_s"].values())
        lines.append(f"| {index + 1} | {rates} | {ratio:.2f} |")
    cpu = result["cpu_us_per_example"]
    lines += ["", "Process CPU per example (median, all threads): "
              + ", ".join(f"{side} {stats['median']:.1f} us" for side, stats in cpu.items()) + "."]
    if "ratio_cached" in result:
        lines.append(f"Both caching (tfxd's default, against the plain read with the same cache) the input "
                     f"function reads {common.md_ratio(result['ratio_cached'])} of the plain read.")
    if "ratio_noshuffle" in result:
        lines.append(f"Against the plain read without its shuffle (interleave, batched parse, prefetch only: a "
                     f"job with less work than training needs) the input function, defaults on, reads "
                     f"{common.md_ratio(result['ratio_noshuffle'])}.")
    if "ratio_sequential" in result:
        lines.append(f"Against the plain read with its files read in sequence, as tfxd reads local files "
                     f"(`training.input.parallel_reads: auto`; the parallel interleave's hand-off of each "
                     f"record between threads avoided), the input function, cache off, reads "
                     f"{common.md_ratio(result['ratio_sequential'])}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sides, reads, graph_uri, examples_uri = sys.argv[2:6]
        common.print_result(worker(sides.split(","), int(reads), graph_uri, examples_uri))
    else:
        outcome = run(quick="--quick" in sys.argv)
        print("\n".join(table_rows(outcome)))
        print(details(outcome))
