"""A disk that fills up while a run writes examples or the model: the run fails naming the root and the
space there, and nothing half-written is published or left as a file of its own. The root lies on a
small tmpfs mounted in a mount namespace of the test's own (`unshare`), so nothing else sees it; the
checks of what is on it run inside that namespace too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BASE_SPEC, write_spec

TFXD = os.path.join(os.path.dirname(sys.executable), "tfxd")
# inside the namespace: mount, run, then list what the run left (the mount ends with the namespace)
SCRIPT = """
mount -t tmpfs -o size={size} tmpfs {fs} || exit 97
{tfxd} run spec.yaml > {out}/stdout.txt 2> {out}/stderr.txt
echo $? > {out}/rc.txt
find {fs} -type f > {out}/files.txt
"""


def _full_run(project: Path, size: str) -> tuple[int, str, list[str], Path]:
    fs = project / "small-disk"
    fs.mkdir()
    out = project / "seen"
    out.mkdir()
    script = SCRIPT.format(size=size, fs=fs, tfxd=TFXD, out=out)
    unshare = shutil.which("unshare")
    assert unshare, "util-linux's unshare is needed to mount a small disk for this test"
    for prefix in ([unshare, "--mount"], [unshare, "--user", "--map-root-user", "--mount"]):  # root, or not
        done = subprocess.run([*prefix, "sh", "-c", script], cwd=project, capture_output=True, text=True,
                              timeout=900)
        if done.returncode == 0:
            break
    assert done.returncode == 0, f"could not mount a small tmpfs: {done.stderr}"
    files = (out / "files.txt").read_text().split()
    return int((out / "rc.txt").read_text()), (out / "stderr.txt").read_text(), files, fs


def _root_spec(project: Path, extra: str) -> None:
    write_spec(project, BASE_SPEC + f"root: {project / 'small-disk' / 'root'}\nbeam: {{workers: 1}}\n" + extra)


@pytest.mark.reliability("environment fault")
def test_a_disk_that_fills_while_examples_are_written(project):
    rows = "".join(f"{i * 0.1},{'abc'[i % 3]},{i % 2},{os.urandom(60).hex()}\n" for i in range(40000))
    (project / "data.csv").write_text("x,city,target,note\n" + rows)  # about 2.5 MB of examples, gzipped
    _root_spec(project, "")
    code, err, files, fs = _full_run(project, "2m")
    assert code == 1, err
    message = " ".join(err.split())
    assert f"ExampleGen failed: no space left on the device under {fs}/root (2.0 MB in all, " in message
    assert "nothing the failed component wrote was published" in message and "Traceback" not in err
    assert not [f for f in files if "/Split-" in f or f.endswith(".partial")], files  # no shard, no half file


@pytest.mark.reliability("environment fault")
def test_a_disk_that_fills_while_the_model_is_written(project):
    _root_spec(project, "model: {type: dnn, hidden_units: [1024, 1024, 1024]}\n")  # about 40 MB with its optimizer
    code, err, files, fs = _full_run(project, "12m")
    assert code == 1, err
    message = " ".join(err.split())
    assert f"Trainer failed: no space left on the device under {fs}/root" in message, message
    assert not [f for f in files if "/Trainer/model/" in f or f.endswith(".partial")], files  # no half model
    assert any("/Transform/transform_graph/" in f for f in files)  # what finished before stays, for a rerun
