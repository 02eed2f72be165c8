"""Lay tfxd out for static tools as the wheel lays it out: a tree of links to this checkout.

pyproject.toml maps the repository's top-level folders to tfxd.* ([tool.setuptools] package-dir), and an
editable install serves that map through an import hook, which type checkers and editors cannot follow.
This writes <root>/tfxd/ with a link to each of tfxd/'s modules and a link to each mapped folder under its
subpackage's name (<root>/tfxd/cli -> cli/), so `tfxd.cli.main` is a path again. mypy reads it
([tool.mypy] mypy_path), pyright and Pylance too ([tool.pyright] extraPaths); a file opened through a link
is the checkout's own. `make setup` writes it; a new module under a mapped folder appears at once, a new
ground-floor module (tfxd/*.py) with the next `make setup`.

Usage: python tools/typing_tree.py build/typing
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools.config.pyprojecttoml import read_configuration

REPO = Path(__file__).resolve().parent.parent


def package_dirs() -> dict[str, str]:
    """pyproject's map, package -> folder (tfxd.cli -> cli), as setuptools itself reads it."""
    mapping: dict[str, str] = read_configuration(REPO / "pyproject.toml")["tool"]["setuptools"]["package-dir"]
    return mapping


def write(root: Path) -> None:
    mapping = package_dirs()
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    package = staging / "tfxd"
    package.mkdir(parents=True)
    for name, folder in sorted(mapping.items()):
        source = REPO / folder
        if name == "tfxd":  # the ground: its modules one by one, since the subpackages join them here
            for module in sorted(source.glob("*.py")):
                (package / module.name).symlink_to(os.path.relpath(module, package))
        elif name.count(".") == 1:  # tfxd.cli -> cli/; deeper names are folders inside those
            (package / name.split(".", 1)[1]).symlink_to(os.path.relpath(source, package), target_is_directory=True)
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.rsplit("Usage: ", 1)[1])
    write(Path(sys.argv[1]).resolve())
