"""`tfxd init --example taxi|penguin|digits`: spec, data and README, a valid spec, --data-only, misuse."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tfxd.cli import main, scaffold

NAMES = ("taxi", "penguin", "digits")
DATA = {
    "taxi": ["data/taxi/data.csv"],
    "penguin": ["data/penguin/eval/data_tfrecord-00000-of-00001.gz",
                "data/penguin/train/data_tfrecord-00000-of-00001.gz"],
    "digits": ["data/digits/digits.tfrecord.gz"],
}


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict[str, Path]:
    """One project per example, written once for the module."""
    base = tmp_path_factory.mktemp("init")
    made = {}
    for name in NAMES:
        result = run_cli("init", str(base / name), "--example", name)
        assert result.exit_code == 0, result.output
        made[name] = base / name
    assert not [p for p in base.iterdir() if p.name.startswith(".")]  # no scratch left behind
    return made


def test_the_cli_offers_every_example():
    choices = next(p for p in main.cli.commands["init"].params if p.name == "example").type.choices
    assert tuple(choices) == tuple(scaffold.EXAMPLES) == NAMES
    assert {p.stem for p in (REPO / "examples").glob("*.yaml")} == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_init_writes_spec_data_and_readme(projects, name):
    project = projects[name]
    assert _files(project) == sorted(["README.md", f"{name}.yaml", "tfxd.schema.json", *DATA[name]])
    assert (project / f"{name}.yaml").read_text() == (REPO / "examples" / f"{name}.yaml").read_text()
    readme = (project / "README.md").read_text()
    assert f"tfxd init --example {name}" in readme and f"data/{name}/" in readme


@pytest.mark.parametrize("name", NAMES)
def test_the_written_spec_validates(projects, name):
    result = run_cli("validate", str(projects[name] / f"{name}.yaml"))
    assert result.exit_code == 0, result.output


def test_penguin_data_is_the_tfx_test_data(projects):
    source = scaffold._package_file("tfx", "components", "testdata", "penguin", "data")
    for split in ("train", "eval"):
        copied = projects["penguin"] / "data" / "penguin" / split / "data_tfrecord-00000-of-00001.gz"
        assert filecmp.cmp(copied, source / f"Split-{split}" / copied.name, shallow=False)


def test_digits_data_holds_all_1797_images(projects):
    import tensorflow as tf

    path = projects["digits"] / "data" / "digits" / "digits.tfrecord.gz"
    examples = [tf.train.Example.FromString(r) for r in
                tf.data.TFRecordDataset(str(path), compression_type="GZIP").as_numpy_iterator()]
    assert len(examples) == 1797
    pixels = [list(e.features.feature["pixels"].float_list.value) for e in examples]
    digits = [e.features.feature["digit"].int64_list.value[0] for e in examples]
    assert {len(p) for p in pixels} == {64}
    assert min(map(min, pixels)) == 0.0 and max(map(max, pixels)) == 16.0  # raw; the spec scales them
    assert sorted(set(digits)) == list(range(10))


@pytest.mark.parametrize("name", NAMES)
def test_data_only_writes_only_the_data(projects, tmp_path, name):
    result = run_cli("init", str(tmp_path), "--example", name, "--data-only")
    assert result.exit_code == 0, result.output
    assert _files(tmp_path) == DATA[name]
    for relative in DATA[name]:  # the same bytes as the full project's: deterministic
        assert filecmp.cmp(tmp_path / relative, projects[name] / relative, shallow=False)
    again = run_cli("init", str(tmp_path), "--example", name, "--data-only")  # over existing data
    assert again.exit_code == 0, again.output
    assert _files(tmp_path) == DATA[name]


def test_an_unknown_example_exits_2_naming_the_choices(tmp_path):
    result = run_cli("init", str(tmp_path / "proj"), "--example", "iris")
    assert result.exit_code == 2
    assert "'iris' is not one of 'taxi', 'penguin', 'digits'" in result.output
    assert "Traceback" not in result.output
    assert not list(tmp_path.iterdir())
    with pytest.raises(scaffold.ScaffoldError, match="unknown example 'iris'; choose one of taxi, penguin, digits"):
        scaffold.init(str(tmp_path / "proj"), "iris")
