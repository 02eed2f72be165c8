"""The end-of-run summary, printed as a table."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from tfxd import console
from tfxd.run_summary import HistoryLine, LocalRun


def show(summary: LocalRun) -> None:
    table = Table(title=f"{summary.pipeline} run {summary.run_id}", title_justify="left")
    table.add_column("component")
    table.add_column("status")
    table.add_column("seconds", justify="right")
    for component in summary.components:
        table.add_row(component["name"], component["status"], f"{component['seconds']:.1f}")
    console.out.print(table)
    examples = summary.examples
    spans = examples.get("spans")
    read = (f"span{'s' if len(spans) > 1 else ''} {', '.join(map(str, spans))}" if spans else "") + (
        f": {examples['span_day']['why']}" if examples.get("span_day") else "")
    if examples.get("splits"):
        splits = ", ".join(f"{name} {count}" for name, count in examples["splits"].items())
        console.info(f"examples: {splits}" + (f" ({read})" if read else ""))
    elif read:
        console.info(f"examples: none read ({read})")
    if examples.get("bad_records"):
        reasons = ", ".join(f"{reason}: {count}" for reason, count in examples["bad_records"].items())
        console.warn(f"bad records skipped: {examples['bad_records_total']} ({reasons})")
    drift = summary.drift or {}
    if drift.get("columns"):
        console.info(f"drift from span {drift['previous_span']} to {drift['span']}: {_largest(drift)}")
    skew = summary.skew or {}
    if skew.get("columns"):
        console.info(f"skew between train and eval: {_largest(skew)}")
    plan = summary.strategy
    if plan:
        console.info(f"strategy: {plan['strategy']} x{plan['replicas']} replicas, global batch "
                     f"{plan['global_batch_size']}, {plan['precision']} ({plan['reason']})")
    warm = summary.training.get("warm_start")
    if warm:
        console.info(f"warm start: from {warm['from']}" if warm["started"] else
                     f"warm start: none ({warm['reason']}); trained from scratch")
    training = summary.training.get("metrics")
    if training:
        console.info("training: " + "  ".join(f"{k} {v:.4f}" for k, v in training.items()))
    if summary.metrics:
        console.info("evaluation: " + "  ".join(f"{k} {v:.4f}" for k, v in summary.metrics.items()))
    _blessing(summary)
    if summary.report:
        console.info(f"report: {summary.report}")
    if summary.history:
        console.info(f"history: {summary.history}")


def _largest(gate: dict[str, Any]) -> str:
    name, value = max(gate["columns"].items(), key=lambda item: item[1]["distance"])
    return f"largest {name} {value['distance']:.4f} (threshold {value['threshold']:g})"


def _blessing(summary: LocalRun) -> None:
    evaluation = summary.evaluation
    if not evaluation:
        return
    if summary.blessed:
        console.success(f"blessed; pushed to {summary.pushed_to}" if summary.pushed_to
                        else "blessed")
        return
    console.warn("not blessed, so not pushed:")
    for reason in evaluation.get("reasons", []):
        console.warn(f"  {reason}")


def show_history(pipeline: str, lines: list[HistoryLine]) -> None:
    """`tfxd history`'s lines: a run per line, newest first, each part said only when the run has it."""
    console.out.print(f"{pipeline}: {len(lines)} run{'s' if len(lines) != 1 else ''}, newest first")
    for line in lines:
        parts = [line.started.replace("T", " ")[:16], line.status + (f" ({line.reason})" if line.reason else "")]
        if line.spans:
            parts.append(f"span{'s' if len(line.spans) > 1 else ''} {', '.join(map(str, line.spans))}")
        if line.examples:
            parts.append(", ".join(f"{split} {count}" for split, count in line.examples.items()))
        if line.strategy:
            parts.append(f"{line.strategy} x{line.replicas}")
        parts += [" ".join(f"{name} {value:.4f}" for name, value in line.metrics.items())] if line.metrics else []
        if line.blessed is not None:
            parts.append("blessed" if line.blessed else "not blessed")
        if line.pushed:
            parts.append(f"pushed {line.pushed_version}")
        parts += [f"{name} {verdict_text(verdict)}" for name, verdict in (("drift", line.drift), ("skew", line.skew))
                  if verdict]
        if line.seconds is not None:
            parts.append(f"{line.seconds:.1f} s")
        console.out.print("  ".join(parts))


def verdict_text(verdict: dict[str, Any]) -> str:
    """A gate's verdict in short (HistoryLine.drift, .skew): `stopped: bmi 1.0000 > 0.3`, `within: fare 0.0412`."""
    if "feature" not in verdict:
        return verdict["verdict"]
    past = f" > {verdict['threshold']:g}" if verdict["verdict"] in ("stopped", "beyond") else ""
    return f"{verdict['verdict']}: {verdict['feature']} {verdict['distance']:.4f}{past}"
