"""Good specs: examples validate, render is a fixed point, --set and ${VAR} change exactly one thing."""

from __future__ import annotations

import json

import jsonschema
import pytest
from ruamel.yaml import YAML

from tests.conftest import BASE_SPEC, REPO, run_cli, write_spec
from tfxd.pipeline.spec.load import load_spec
from tfxd.pipeline.spec.render import json_schema, to_yaml

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def read_yaml(text: str):
    return YAML(typ="safe", pure=True).load(text)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_examples_validate(example):
    result = run_cli("validate", str(example))
    assert result.exit_code == 0, result.output
    assert "is valid" in result.output


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_render_is_a_fixed_point(example, tmp_path):
    first = run_cli("render", str(example))
    assert first.exit_code == 0, first.output
    # render beside the original so relative paths still resolve
    rendered = example.parent / f".{example.stem}.rendered.yaml"
    try:
        rendered.write_text(first.stdout, encoding="utf-8")
        second = run_cli("render", str(rendered))
    finally:
        rendered.unlink()
    assert second.exit_code == 0, second.output
    assert second.stdout == first.stdout


def test_render_fills_every_default(project):
    result = run_cli("render", str(write_spec(project, BASE_SPEC)))
    data = read_yaml(result.stdout)
    assert data["root"] == "tfxd-runs/demo"
    assert data["push"]["to"] == "tfxd-runs/demo/serving"
    assert data["data"]["splits"] == {"train": 0.8, "eval": 0.2}
    assert data["features"][1] == {"name": "city", "transform": "vocabulary", "expr": None, "fill": None,
                                   "top_k": 10, "oov_buckets": 1, "frequency_threshold": 0}
    assert "top_k" not in data["features"][0]  # options of other transforms are not shown
    assert data["model"]["metrics"] == ["accuracy"]
    assert data["evaluation"]["metrics"] == ["binary_accuracy", "auc"]
    assert data["training"]["callbacks"]["backup_and_restore"] is True
    assert data["targets"]["local"] == {"orchestrator": "local", "trainer": {"workers": 1, "parameter_servers": 0,
                                                                         "network": "loopback"}}
    assert data["label"]["column"] == "target"


def test_defaults_follow_the_task(project):
    spec = BASE_SPEC.replace("task: binary", "task: regression")
    loaded = load_spec(str(write_spec(project, spec)))
    assert loaded.spec.model.metrics == ["mean_absolute_error"]
    assert loaded.spec.evaluation.metrics == ["mean_squared_error"]


def test_set_changes_exactly_the_key(project):
    spec = write_spec(project, BASE_SPEC)
    plain = read_yaml(run_cli("render", str(spec)).stdout)
    changed = read_yaml(run_cli("render", str(spec), "--set", "training.steps=200",
                                "--set", "features[1].top_k=5", "--set", "beam.args=[--a, --b]").stdout)
    assert changed["training"]["steps"] == 200
    assert changed["features"][1]["top_k"] == 5
    assert changed["beam"]["args"] == ["--a", "--b"]
    for data in (plain, changed):
        data["training"].pop("steps")
        data["features"][1].pop("top_k")
        data["beam"].pop("args")
    assert changed == plain


def test_set_can_switch_steps_to_epochs(project):
    spec = write_spec(project, BASE_SPEC)
    result = run_cli("render", str(spec), "--set", "training.steps=null", "--set", "training.epochs=3")
    data = read_yaml(result.stdout)
    assert (data["training"]["steps"], data["training"]["epochs"]) == (None, 3)


def test_environment_variables_are_interpolated(project, monkeypatch):
    text = BASE_SPEC.replace("name: demo", "name: ${TFXD_T_NAME}").replace(
        "steps: 10", "steps: ${TFXD_T_STEPS:-77}").replace("path: data.csv", "path: '${TFXD_T_DIR:-.}/data.csv'")
    spec = write_spec(project, text)
    monkeypatch.setenv("TFXD_T_NAME", "from-env")
    monkeypatch.delenv("TFXD_T_STEPS", raising=False)
    monkeypatch.delenv("TFXD_T_DIR", raising=False)
    loaded = load_spec(str(spec))
    assert loaded.spec.name == "from-env"
    assert loaded.spec.training.steps == 77  # an unquoted value is read as YAML after interpolation
    assert loaded.spec.data.path == "./data.csv"
    monkeypatch.setenv("TFXD_T_STEPS", "5")
    assert load_spec(str(spec)).spec.training.steps == 5


def test_quoted_interpolation_stays_a_string(project, monkeypatch):
    monkeypatch.setenv("TFXD_T_DESC", "42")
    spec = write_spec(project, BASE_SPEC + "description: '${TFXD_T_DESC}'\n")
    assert load_spec(str(spec)).spec.description == "42"


def test_dollar_dollar_is_a_literal_dollar(project):
    spec = write_spec(project, BASE_SPEC + "description: 'costs $$5'\n")
    assert load_spec(str(spec)).spec.description == "costs $5"


def test_relative_paths_resolve_against_the_spec_folder(project, monkeypatch, tmp_path_factory):
    spec = write_spec(project, BASE_SPEC)
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    loaded = load_spec(str(spec))
    assert loaded.resolve(loaded.spec.data.path) == str(project / "data.csv")
    assert loaded.resolve("gs://bucket/x") == "gs://bucket/x"


def test_callbacks_accept_true_and_false(project):
    spec = write_spec(project, BASE_SPEC + "  callbacks: {early_stopping: true, reduce_lr_on_plateau: false}\n")
    callbacks = load_spec(str(spec)).spec.training.callbacks
    assert callbacks.early_stopping is not None and callbacks.early_stopping.patience == 3
    assert callbacks.reduce_lr_on_plateau is None


def test_json_schema_accepts_the_examples_and_rejects_a_wrong_spec():
    schema = json.loads(json_schema())
    validator = jsonschema.Draft202012Validator(schema)
    assert EXAMPLES
    for example in EXAMPLES:
        validator.validate(read_yaml(example.read_text()))
    validator.validate(read_yaml(BASE_SPEC))
    wrong = read_yaml(BASE_SPEC)
    wrong["training"]["batch_size"] = "big"
    wrong["data"]["formt"] = "csv"
    errors = list(validator.iter_errors(wrong))
    assert {tuple(e.absolute_path) for e in errors} >= {("training", "batch_size"), ("data",)}


def test_committed_schema_is_current():
    assert (REPO / "examples" / "tfxd.schema.json").read_text() == json_schema()


def test_schema_command_prints_it():
    result = run_cli("schema")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "tfxd pipeline spec (version 1)"


def test_render_output_round_trips_through_yaml(project):
    loaded = load_spec(str(write_spec(project, BASE_SPEC)))
    assert read_yaml(to_yaml(loaded.spec))["features"][0]["name"] == "x"
