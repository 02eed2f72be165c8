"""``tfxd init``: a ready project from one of the examples, its data taken from installed packages."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from tfxd import examples
from tfxd.pipeline.spec.render import json_schema


class ScaffoldError(Exception):
    """The project cannot be written where asked; nothing was written."""


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ScaffoldError(f"the {package} package is not installed; run `make setup` (or `uv sync`)")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.exists():
        raise ScaffoldError(f"the example data is missing from the {package} package (looked for {path})")
    return path


def _taxi_data(data_dir: Path) -> None:
    source = _package_file("tfx", "examples", "chicago_taxi_pipeline", "data", "simple", "data.csv")
    (data_dir / "taxi").mkdir(parents=True)
    shutil.copyfile(source, data_dir / "taxi" / "data.csv")


def _penguin_data(data_dir: Path) -> None:
    source = _package_file("tfx", "components", "testdata", "penguin", "data")
    for split in ("train", "eval"):
        shutil.copytree(source / f"Split-{split}", data_dir / "penguin" / split)


def _digits_data(data_dir: Path) -> None:
    """scikit-learn's 1,797 8x8 digits as gzipped tf.Examples: `pixels` (64 floats, raw 0..16, row by row)
    and `digit` (int 0..9), in load_digits' order; the same bytes every time."""
    _package_file("sklearn", "datasets", "data", "digits.csv.gz")
    import tensorflow as tf
    from sklearn.datasets import load_digits

    digits = load_digits()
    (data_dir / "digits").mkdir(parents=True)
    with tf.io.TFRecordWriter(str(data_dir / "digits" / "digits.tfrecord.gz"), options="GZIP") as writer:
        for pixels, digit in zip(digits.data.tolist(), digits.target.tolist(), strict=True):
            feature = {"pixels": tf.train.Feature(float_list=tf.train.FloatList(value=pixels)),
                       "digit": tf.train.Feature(int64_list=tf.train.Int64List(value=[digit]))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
                deterministic=True))


class Example(NamedTuple):
    write_data: Callable[[Path], None]  # writes data/<example>/... under the folder it is given
    source: str  # where the data comes from, for the project's README


EXAMPLES = {
    "taxi": Example(_taxi_data, "the Chicago taxi sample inside the tfx wheel"),
    "penguin": Example(_penguin_data, "the Palmer penguins TFRecords among the tfx wheel's test data"),
    "digits": Example(_digits_data, "scikit-learn's 8x8 digits, sklearn.datasets.load_digits, "
                                    "written as gzipped TFRecords"),
}

README = """# {example}: a tfxd project

Made by `tfxd init --example {example}`.

    tfxd validate {example}.yaml     # check the spec (no TensorFlow needed)
    tfxd render {example}.yaml       # the spec with every default filled in
    tfxd run {example}.yaml          # run it here

- `{example}.yaml`: the pipeline spec. Editors that speak the YAML language server
  check it against `tfxd.schema.json` (see its first line).
- `data/{example}/`: the data, taken from installed packages ({source}).
"""


def example_spec(example: str) -> Path:
    """The example's spec file: package data of tfxd.examples (examples/ of a source checkout)."""
    path = Path(str(resources.files(examples) / f"{example}.yaml"))
    if not path.is_file():
        raise ScaffoldError(f"the example spec {path} is not installed with this copy of tfxd")
    return path


def init(directory: str, example: str, data_only: bool = False, force: bool = False) -> list[str]:
    """Write the example project (or only its data, over what is there) into ``directory``; return the
    paths written."""
    if example not in EXAMPLES:
        raise ScaffoldError(f"unknown example {example!r}; choose one of {', '.join(EXAMPLES)}")
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"{directory} exists and is not a directory")
    if not data_only and root.exists() and any(root.iterdir()) and not force:
        raise ScaffoldError(f"{directory} is not empty; choose a new directory or pass --force")
    root.parent.mkdir(parents=True, exist_ok=True)
    # Build everything in a scratch folder beside the target, then move it in: no half-written project.
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=f".{root.name}.tfxd-init-") as scratch:
        staging = Path(scratch)
        if not data_only:
            template = example_spec(example)
            shutil.copyfile(template, staging / template.name)
            (staging / "tfxd.schema.json").write_text(json_schema(), encoding="utf-8")
            (staging / "README.md").write_text(
                README.format(example=example, source=EXAMPLES[example].source), encoding="utf-8")
        EXAMPLES[example].write_data(staging / "data")
        written = []
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            target = root / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            written.append(str(target))
    return written
