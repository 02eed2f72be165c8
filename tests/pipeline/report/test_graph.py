"""`tfxd graph`: the DAG of the nodes tfxd builds, as Mermaid and DOT; SVG/PNG need graphviz."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

TAXI = str(REPO / "examples" / "taxi.yaml")
EDGES = [
    "ExampleGen -->|examples| StatisticsGen",
    "StatisticsGen -->|statistics| SchemaGen",
    "SchemaGen -->|schema| ExampleValidator",
    "ExampleGen -->|examples| Transform",
    "ExampleValidator --> Transform",
    "Transform -->|transformed_examples, transform_graph| Trainer",
    "Trainer -->|model| latest_blessed_model_resolver",
    "latest_blessed_model_resolver -->|model| Evaluator",
    "ExampleGen -->|examples| Evaluator",
    "Evaluator -->|blessing| Pusher",
]


def graph(*args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path} if path is not None else None
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    return subprocess.run([tfxd, "graph", TAXI, *args], capture_output=True, text=True, env=env, timeout=300)


def test_mermaid_and_dot_show_every_component_and_artifact(tmp_path):
    mermaid = graph()
    assert mermaid.returncode == 0, mermaid.stderr
    lines = mermaid.stdout.splitlines()
    assert lines[:2] == ["%% taxi-tips", "flowchart LR"]
    for edge in EDGES:
        assert f"  {edge}" in lines, edge
    assert not any("Pusher -->" in line for line in lines)  # Pusher is the sink
    result = graph("--format", "dot", "-o", str(tmp_path / "taxi.dot"))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "taxi.dot").read_text()
    assert text.startswith('digraph "taxi-tips" {') and text.rstrip().endswith("}")
    assert '"Trainer" -> "Evaluator" [label="model"];' in text
    assert text.count(" -> ") == len([line for line in lines if "-->" in line])


def test_svg_without_graphviz_says_what_to_install(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with python but no `dot`
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    result = graph("--format", "svg", path=str(bin_dir))
    assert result.returncode == 2
    assert "needs graphviz's `dot` program" in result.stderr and "--format mermaid" in result.stderr
    result = graph("--format", "png")
    assert result.returncode == 2 and "name a file with -o FILE" in result.stderr
