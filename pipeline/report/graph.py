"""`tfxd graph`: the pipeline's DAG, read off the TFX nodes tfxd builds (so it cannot drift from what
runs), as Mermaid or DOT text, or SVG/PNG through graphviz's `dot`."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from typing import Any

FORMATS = ("mermaid", "dot", "svg", "png")


class GraphError(Exception):
    """The graph cannot be drawn as asked (graphviz missing, or it failed)."""


def edges(nodes: list[Any]) -> list[tuple[str, str, str]]:
    """(producer, consumer, 'artifact, ...') for every channel between two nodes, in node order."""
    labels: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node in nodes:
        # a Resolver's `inputs` are its resolved channels; `raw_inputs` name their producers
        for channel in getattr(node, "raw_inputs", node.inputs).values():
            producer = getattr(channel, "producer_component_id", None)
            if producer:
                key = getattr(channel, "output_key", None) or channel.type_name
                if key not in labels[(producer, node.id)]:
                    labels[(producer, node.id)].append(key)
        for upstream in node.upstream_nodes:  # an order without data, e.g. the anomaly gate before Transform
            labels.setdefault((upstream.id, node.id), [])
    return [(producer, consumer, ", ".join(keys)) for (producer, consumer), keys in labels.items()]


def mermaid(name: str, nodes: list[Any]) -> str:
    lines = [f"%% {name}", "flowchart LR"]
    lines += [f"  {node.id}" for node in nodes]
    lines += [f"  {producer} -->|{label}| {consumer}" if label else f"  {producer} --> {consumer}"
              for producer, consumer, label in edges(nodes)]
    return "\n".join(lines) + "\n"


def dot(name: str, nodes: list[Any]) -> str:
    lines = [f'digraph "{name}" {{', "  rankdir=LR;", '  node [shape=box, style=rounded, fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];']
    lines += [f'  "{node.id}";' for node in nodes]
    lines += [f'  "{producer}" -> "{consumer}" [label="{label}"];' if label else
              f'  "{producer}" -> "{consumer}" [style=dashed];' for producer, consumer, label in edges(nodes)]
    return "\n".join(lines) + "\n}\n"


def render(name: str, nodes: list[Any], fmt: str) -> bytes:
    """The graph in ``fmt`` (one of FORMATS)."""
    if fmt == "mermaid":
        return mermaid(name, nodes).encode()
    text = dot(name, nodes)
    if fmt == "dot":
        return text.encode()
    binary = shutil.which("dot")
    if binary is None:
        raise GraphError(f"--format {fmt} needs graphviz's `dot` program, which is not installed; install "
                         "graphviz (apt-get install graphviz, brew install graphviz), or use --format mermaid "
                         "or --format dot")
    done = subprocess.run([binary, f"-T{fmt}"], input=text.encode(), capture_output=True, timeout=60)
    if done.returncode != 0:
        raise GraphError(f"graphviz failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout
