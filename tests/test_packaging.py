"""One import name, tfxd, for the repository's folders: the wheel lays them out under tfxd/ (and runs
from there: the dotted paths compiled files name, `tfxd init`'s example specs), the editable install
maps the same names onto the checkout, and nothing else becomes importable, so a user's own `pipeline`
package and Kubeflow's SDK namespaces (`kubeflow.training`) stay theirs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from setuptools.config.pyprojecttoml import read_configuration

from tests.conftest import REPO
from tests.test_house import MODULES

OTHER_NAMES = ("pipeline", "components", "kubeflow", "trainer_module", "cli", "examples")


def _python(code: str, cwd: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_pyproject_maps_every_folder_and_lists_every_package():
    setuptools = read_configuration(REPO / "pyproject.toml")["tool"]["setuptools"]
    folders = {path.parent.name for path in REPO.glob("*/__init__.py")} - {"tests", "tools"}  # never shipped
    assert set(setuptools["package-dir"].values()) == folders
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert set(setuptools["packages"]) == packages


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from the files git would commit, in a copy of them (nothing written here)."""
    source = tmp_path_factory.mktemp("source")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO / name).read_bytes())
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(out), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (path,) = out.glob("tfxd-*.whl")
    return path


def test_the_wheel_holds_every_module_under_tfxd(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {name.split("/")[0] for name in names} == {"tfxd", wheel.name.split("-py3")[0] + ".dist-info"}
    for module, path in MODULES.items():
        inside = module.replace(".", "/") + ("/__init__.py" if path.name == "__init__.py" else ".py")
        assert inside in names, f"{module} ({path.relative_to(REPO)}) is not in the wheel"
    assert {f"tfxd/examples/{name}.yaml" for name in ("taxi", "penguin", "digits")} <= names
    assert {f"tfxd/kubeflow/{name}.yaml" for name in ("trainjob-runtime", "trainjob-rbac", "tfjob-rbac")} <= names
    entry_points = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt")
    assert "tfxd = tfxd.cli.main:main" in entry_points.decode()


def test_the_wheel_runs_on_its_own(wheel, tmp_path):
    """Unpacked ahead of the editable install on sys.path, every module imports from the wheel (the
    executors, preprocessing_fn and run_fn compiled files name by dotted path among them), and `tfxd
    init` + `validate` work from its packaged example specs."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    project = tmp_path / "project"
    modules = sorted(MODULES)
    code = (f"import importlib, os\nsite = {str(site)!r}\n"
            f"for name in {modules!r}:\n"
            "    module = importlib.import_module(name)\n"
            "    assert module.__file__.startswith(site), (name, module.__file__)\n"
            "from tfxd.components.trainer.executor import Executor\n"
            "from tfxd.trainer_module.run_fn import run_fn\n"
            "from tfxd.components.transform.preprocessing import preprocessing_fn\n"
            "from tfxd.cli.main import cli\n"
            f"for args in (['init', {str(project)!r}, '--example', 'taxi'], ['validate', {str(project / 'taxi.yaml')!r}],\n"
            "             ['kubeflow-manifest', 'trainjob-runtime']):\n"
            "    try:\n        cli(args)\n    except SystemExit as exit:\n        assert exit.code == 0, (args, exit.code)\n"
            "print('FROM WHEEL')\n")
    result = _python(code, tmp_path, pythonpath=str(site))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FROM WHEEL" in result.stdout and "taxi.yaml is valid" in result.stdout
    assert "kind: ClusterTrainingRuntime" in result.stdout  # the runtime, printed from the wheel's own copy


def test_only_tfxd_is_importable_beside_a_users_own_packages(tmp_path):
    """The editable install exposes tfxd (mapped onto this checkout) and no folder name of its own: a
    user's `pipeline` package and a `kubeflow` namespace package (as Kubeflow's SDKs install) are
    theirs, next to tfxd.pipeline and tfxd.kubeflow."""
    theirs = tmp_path / "theirs"
    (theirs / "pipeline").mkdir(parents=True)
    (theirs / "pipeline" / "__init__.py").write_text("OWNER = 'user'\n")
    (theirs / "kubeflow" / "training").mkdir(parents=True)  # a namespace package, no kubeflow/__init__.py
    (theirs / "kubeflow" / "training" / "__init__.py").write_text("OWNER = 'kubeflow sdk'\n")
    code = ("import importlib.util\n"
            f"print([n for n in {OTHER_NAMES!r} if n not in ('pipeline', 'kubeflow') and importlib.util.find_spec(n)])\n"
            "import pipeline, kubeflow.training, tfxd.pipeline.spec.load, tfxd.kubeflow\n"
            "print(pipeline.OWNER, '|', kubeflow.training.OWNER, '|', tfxd.pipeline.__file__)\n")
    result = _python(code, tmp_path, pythonpath=str(theirs))
    assert result.returncode == 0, result.stderr
    found, owners = result.stdout.splitlines()
    assert found == "[]"
    assert owners == f"user | kubeflow sdk | {REPO / 'pipeline' / '__init__.py'}"
    bare = _python("import importlib.util\n"
                   f"print([n for n in {OTHER_NAMES!r} if importlib.util.find_spec(n)])", tmp_path)
    assert bare.stdout.strip() == "[]", bare.stderr


def test_the_typing_tree_lays_out_every_module_where_its_import_name_says(tmp_path):
    """tools/typing_tree.py: what mypy and editors read. Every module of the package is at the path its
    import name gives, and is this checkout's own file (a link), with pyproject's map as the only source."""
    from tests.test_house import MODULES
    from tools import typing_tree

    typing_tree.write(tmp_path / "typing")
    for name, path in MODULES.items():
        parts = name.split(".")
        module = tmp_path / "typing" / Path(*parts)
        found = module / "__init__.py" if path.name == "__init__.py" else module.with_suffix(".py")
        assert found.resolve() == path.resolve(), f"{name}: {found} is not {path}"
    assert not (tmp_path / "typing.partial").exists()
    assert sorted(p.name for p in (tmp_path / "typing").iterdir()) == ["tfxd"]
