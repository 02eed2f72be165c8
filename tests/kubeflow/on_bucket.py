"""Compiled examples on a bucket of the suite's Cloud Storage API server (tests/buckets/), and their
replays in its network namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

TFXD = os.path.join(os.path.dirname(sys.executable), "tfxd")


def on_bucket(spec_text: str, bucket: str) -> str:
    """An example's spec with its data, both targets' roots and its push destination on ``bucket``."""
    on_it = spec_text.replace("path: data/", f"path: gs://{bucket}/data/").replace("gs://my-bucket/", f"gs://{bucket}/")
    return f"push: {{to: gs://{bucket}/serving}}\n" + on_it


def compiled_on_bucket(tmp_path_factory, example: str, bucket: str, *sets: str,
                       targets: tuple[str, ...] = ("kubeflow",)) -> dict[str, Path]:
    """A scratch project holding ``example``'s spec on ``bucket`` (no data: the data is on the bucket) and the
    files compiled for ``targets``."""
    from tfxd.kubeflow.compile import compile_to
    from tfxd.pipeline.spec.load import load_spec

    project = tmp_path_factory.mktemp("project")
    (project / f"{example}.yaml").write_text(on_bucket((REPO / "examples" / f"{example}.yaml").read_text(), bucket))
    out = tmp_path_factory.mktemp("compiled")
    files = {"project": project, "root": tmp_path_factory.mktemp("replays")}
    for target in targets:
        loaded = load_spec(str(project / f"{example}.yaml"), list(sets), target=target, check_files=False)
        name = f"{example}-{target}.{'json' if target == 'vertex' else 'yaml'}"
        files[target] = Path(compile_to(loaded, target, str(out / name)))
    return files


def replay_on_bucket(server, compiled: Path, files: dict, *args: str,
                     root: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """`tfxd replay` of ``compiled`` in the server's namespace, which succeeds; its output and summary."""
    root = root or files["root"]
    result = server.run(TFXD, "replay", str(compiled), "--project", str(files["project"]), "--root", str(root), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    newest = max(root.glob("*/summary.json"), key=lambda p: p.stat().st_mtime)
    return result, json.loads(newest.read_text())


def objects(server, uri: str) -> list[str]:
    """The object names under ``uri`` (gs://bucket/prefix) on the server."""
    return server.under(uri)[2]
