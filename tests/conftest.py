"""Shared fixtures: a small valid project written by each test into its own folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tfxd.cli.main import cli

REPO = Path(__file__).resolve().parent.parent

BASE_SPEC = textwrap.dedent("""\
    tfxd: 1
    name: demo
    data:
      format: csv
      path: data.csv
    features:
      - name: x
        transform: zscore
      - name: city
        transform: vocabulary
        top_k: 10
    label:
      name: y
      column: target
      task: binary
    training:
      batch_size: 32
      steps: 10
    """)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with data.csv and nothing else; tests write their spec into it."""
    (tmp_path / "data.csv").write_text("x,city,target\n1.0,a,1\n2.0,b,0\n", encoding="utf-8")
    return tmp_path


def write_spec(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
