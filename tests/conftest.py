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


# The failure cases bench/reliability.py counts, one kind each: `@pytest.mark.reliability(KIND)` on a test
# (or a parametrized case) that makes a real failure happen and asserts it is handled well.
RELIABILITY_KINDS = ("bad spec", "bad data", "crash point", "environment fault", "compiled file")


@pytest.fixture(autouse=True)
def _reliability_kind(request: pytest.FixtureRequest, record_property) -> None:
    """The case's kind, into the junit report that bench/reliability.py reads."""
    marker = request.node.get_closest_marker("reliability")
    if marker is not None:
        assert marker.args and marker.args[0] in RELIABILITY_KINDS, marker.args
        record_property("reliability", marker.args[0])
