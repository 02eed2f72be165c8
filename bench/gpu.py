"""GPU: where this machine has one, the taxi and digits examples trained under `strategy: auto`, with the
plan chosen and the training throughput. Where it has none, the result says so; nothing is guessed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import common

NAME = "gpu"
EXAMPLES = ("taxi", "digits")


def _gpus() -> list[str]:
    """The GPUs TensorFlow sees here (asked in a child process, so this one stays light)."""
    code = ("import tfxd, tensorflow as tf; "
            "print('\\n'.join(d.name for d in tf.config.list_physical_devices('GPU')))")
    found = subprocess.run([sys.executable, "-c", code], cwd=common.REPO, capture_output=True, text=True,
                           check=True)
    return [line for line in found.stdout.splitlines() if line.startswith("/physical_device")]


def _train(example: str) -> dict:
    """The example up to its Trainer, from an empty root; the plan and steps/s after the first epoch."""
    root = common.scratch(f"gpu/{example}")
    spec = os.path.join(common.REPO, "examples", f"{example}.yaml")
    run = common.measure([common.TFXD, "run", spec, "--to", "Trainer", "--set", f"root={root}"], cwd=common.REPO,
                         log=os.path.join(common.scratch("gpu/logs", fresh=False), f"{example}.log"))
    summary = common.run_summary(root)
    training, plan = summary["training"], summary["strategy"]
    later = training["history"][1:] or training["history"]  # the first epoch carries the tracing
    steps = training["steps_per_epoch"] * len(later)
    seconds = sum(epoch["train_seconds"] for epoch in later)
    return {"example": example, "wall_seconds": run["seconds"], "strategy": plan["strategy"],
            "replicas": plan["replicas"], "global_batch_size": plan["global_batch_size"],
            "precision": plan["precision"], "reason": plan["reason"], "steps_per_second": steps / seconds,
            "examples_per_second": steps * plan["global_batch_size"] / seconds}


def run(quick: bool = False) -> dict:
    gpus = _gpus()
    if not gpus:
        return {"name": NAME, "available": False, "gpus": [], "runs": [], "targets": [],
                "note": "no GPU available on this machine; nothing was measured"}
    return {"name": NAME, "available": True, "gpus": gpus, "runs": [_train(example) for example in EXAMPLES],
            "targets": []}  # recorded where a GPU is at hand, judged by no target


def table_rows(result: dict) -> list[str]:
    if not result["available"]:
        return ["| GPU: taxi and digits training under `auto` | no GPU available | - | - | not measured |"]
    rows = []
    for r in result["runs"]:
        rows.append(f"| GPU ({len(result['gpus'])}): {r['example']} training under `auto` "
                    f"| {r['strategy']} x{r['replicas']}, {r['precision']}: {r['steps_per_second']:.0f} steps/s, "
                    f"{r['examples_per_second']:.0f} examples/s | - | - | recorded |")
    return rows


def details(result: dict) -> str:
    if not result["available"]:
        return f"### GPU\n\n{result['note']}."
    lines = ["### GPU", "", "| example | plan | reason | steps/s | examples/s | wall s (to Trainer) |",
             "|---|---|---|---|---|---|"]
    for r in result["runs"]:
        lines.append(f"| {r['example']} | {r['strategy']} x{r['replicas']}, batch {r['global_batch_size']}, "
                     f"{r['precision']} | {r['reason']} | {r['steps_per_second']:.1f} | "
                     f"{r['examples_per_second']:.0f} | {r['wall_seconds']:.1f} |")
    return "\n".join(lines)
