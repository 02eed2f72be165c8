"""The CLI front: version, help, misuse, init, and staying free of TensorFlow."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import BASE_SPEC, REPO, run_cli, write_spec
from tfxd.cli.main import cli

VERBS = sorted(cli.commands)


def test_version():
    result = run_cli("--version")
    assert result.exit_code == 0
    assert result.output.startswith("tfxd, version 0.1.0")


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_help(verb):
    result = run_cli(verb, "--help")
    assert result.exit_code == 0
    assert f"Usage: cli {verb}" in result.output or f"Usage: tfxd {verb}" in result.output


def test_help_lists_only_working_verbs():
    result = run_cli("--help")
    assert set(VERBS) == {"init", "validate", "render", "schema", "run", "plan", "graph", "history", "compile",
                          "submit", "schedule", "replay", "kubeflow-manifest"}
    for verb in VERBS:
        assert verb in result.output


@pytest.mark.parametrize("args", [["frobnicate"], ["validate"], ["validate", "a.yaml", "--target", "mars"],
                                  ["init", "x", "--example", "nope"], ["validate", "--bogus", "a.yaml"]])
def test_command_line_misuse_exits_2(args):
    result = run_cli(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_init_writes_a_valid_project(tmp_path):
    target = tmp_path / "proj"
    result = run_cli("init", str(target), "--example", "taxi")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in target.iterdir()) == ["README.md", "data", "taxi.yaml", "tfxd.schema.json"]
    with open(target / "data" / "taxi" / "data.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:2] == ["pickup_community_area", "fare"]
    assert len(rows) == 15003  # a header and 15,002 trips
    assert (target / "taxi.yaml").read_text().startswith("# yaml-language-server: $schema=tfxd.schema.json")
    assert json.loads((target / "tfxd.schema.json").read_text())["title"].startswith("tfxd")
    assert run_cli("validate", str(target / "taxi.yaml")).exit_code == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch left behind


def test_init_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    result = run_cli("init", str(tmp_path))
    assert result.exit_code == 2
    assert "is not empty" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_init_data_only(tmp_path):
    result = run_cli("init", str(tmp_path), "--data-only")
    assert result.exit_code == 0
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()] == ["data/taxi/data.csv"]


def test_yaml_tags_construct_nothing(project):
    marker = project / "pwned"
    text = BASE_SPEC.replace("column: target", f"column: !!python/object/apply:os.system ['touch {marker}']")
    result = run_cli("validate", str(write_spec(project, text)))
    assert result.exit_code == 2
    assert not marker.exists()


def _fresh(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_validate_imports_no_tensorflow_tfx_beam_or_kfp(project):
    spec = write_spec(project, BASE_SPEC)
    code = ("import sys\nfrom tfxd.cli.main import cli\n"
            "try:\n    cli(['validate', sys.argv[1]])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'tensorflow', 'tfx', 'apache_beam', 'kfp', "
            "'keras', 'tf_keras', 'tensorflow_transform'} or m.startswith(('google.protobuf', 'google.cloud.')))\n"
            "print('HEAVY', heavy)\n")
    result = _fresh(code, str(spec))
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


@pytest.mark.parametrize("module", ["tfxd.components", "tfxd.trainer_module.run_fn", "tfxd.kubeflow",
                                    "tfxd.components.trainer.local_worker"])
def test_any_tfxd_import_selects_legacy_keras_first(module):
    result = _fresh(f"import os\nos.environ.pop('TF_USE_LEGACY_KERAS', None)\nimport {module}\n"
                    "print(os.environ['TF_USE_LEGACY_KERAS'], os.environ['TF_CPP_MIN_LOG_LEVEL'])")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "3"]


def test_console_script_validates(project):
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    result = subprocess.run([tfxd, "validate", str(write_spec(project, BASE_SPEC))], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "is valid" in result.stdout


def test_plan_prints_the_plan_as_json(project):
    tfxd = os.path.join(os.path.dirname(sys.executable), "tfxd")
    spec = write_spec(project, BASE_SPEC)
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC")}
    result = subprocess.run([tfxd, "plan", str(spec), "--json"], capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["strategy"] == "default" and plan["replicas"] == 1 and plan["global_batch_size"] == 32
    assert plan["task"] == {"type": None, "index": 0} and plan["is_chief"] is True
    assert result.stderr == ""  # TensorFlow's start-up chatter stays quiet
    refused = subprocess.run([tfxd, "plan", str(spec), "--set", "training.strategy=mirrored"], capture_output=True,
                             text=True, timeout=120, env=env)
    assert refused.returncode == 2
    assert "mirrored needs two or more devices" in refused.stderr
