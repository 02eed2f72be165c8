"""``tfxd init``: a ready project from one of the examples, its data taken from installed packages."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from pipeline.render import json_schema


class ScaffoldError(Exception):
    """The project cannot be written where asked; nothing was written."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ScaffoldError(f"the {name} package is not installed; run `make setup` (or `uv sync`)")
    return Path(next(iter(spec.submodule_search_locations)))


def _taxi_data(data_dir: Path) -> list[Path]:
    source = _package_dir("tfx") / "examples" / "chicago_taxi_pipeline" / "data" / "simple" / "data.csv"
    if not source.is_file():
        raise ScaffoldError(f"the taxi data is missing from the tfx package (looked for {source})")
    target = data_dir / "taxi" / "data.csv"
    _copy_atomic(source, target)
    return [target]


DATA_WRITERS = {"taxi": _taxi_data}

README = """# {example}: a tfxd project

Made by `tfxd init --example {example}`.

    tfxd validate {example}.yaml     # check the spec (no TensorFlow needed)
    tfxd render {example}.yaml       # the spec with every default filled in

- `{example}.yaml`: the pipeline spec. Editors that speak the YAML language server
  check it against `tfxd.schema.json` (see its first line).
- `data/{example}/`: the data, copied out of installed packages ({source}).
"""
SOURCES = {"taxi": "the Chicago taxi sample inside the tfx wheel"}


def examples_dir() -> Path:
    """The example specs: packaged inside the wheel, or examples/ of a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "examples", here.parent / "examples"):
        if candidate.is_dir():
            return candidate
    raise ScaffoldError("the example specs are not installed with this copy of tfxd")


def init(directory: str, example: str, data_only: bool = False, force: bool = False) -> list[str]:
    """Write the example project (or only its data) into ``directory``; return the paths written."""
    if example not in DATA_WRITERS:
        raise ScaffoldError(f"unknown example {example!r}; choose one of {', '.join(DATA_WRITERS)}")
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"{directory} exists and is not a directory")
    if data_only:
        root.mkdir(parents=True, exist_ok=True)
        return [str(p) for p in DATA_WRITERS[example](root / "data")]
    if root.exists() and any(root.iterdir()) and not force:
        raise ScaffoldError(f"{directory} is not empty; choose a new directory or pass --force")
    template = examples_dir() / f"{example}.yaml"
    root.parent.mkdir(parents=True, exist_ok=True)
    # Build everything in a scratch folder beside the target, then move it in: no half-written project.
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=f".{root.name}.tfxd-init-") as scratch:
        staging = Path(scratch)
        shutil.copyfile(template, staging / template.name)
        (staging / "tfxd.schema.json").write_text(json_schema(), encoding="utf-8")
        (staging / "README.md").write_text(README.format(example=example, source=SOURCES[example]),
                                           encoding="utf-8")
        DATA_WRITERS[example](staging / "data")
        written = []
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            target = root / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            written.append(str(target))
    return written


def _copy_atomic(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader never sees half of it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, target)
