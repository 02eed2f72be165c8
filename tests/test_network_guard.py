"""The suite's network guard bites: a test that dials outside loopback fails, naming the address, whether it
dialled itself or a process it started did, and whether or not the refusal was caught (tests/network_guard)."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

from tests.conftest import REPO
from tests.network_guard import sitecustomize as network_guard

INNER = textwrap.dedent("""\
    import socket
    import subprocess
    import sys


    def test_dials_a_host_of_the_internet():
        socket.create_connection(("192.0.2.1", 80), timeout=1)


    def test_starts_a_process_that_dials_and_swallows_the_refusal():
        code = "import socket\\ntry:\\n    socket.create_connection(('198.51.100.7', 443), timeout=1)\\n" \\
               "except OSError as error:\\n    print(error)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert "refused (tests/network_guard)" in out


    def test_starts_a_process_that_writes_a_bucket_path_as_a_local_file(tmp_path):
        code = "import pathlib\\ntry:\\n    pathlib.Path('gs://tfxd-tests/runs/summary.json').write_text('{}')\\n" \\
               "except OSError as error:\\n    print(error)"
        subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
        assert not (tmp_path / "gs:").exists()


    def test_stays_on_loopback():
        server = socket.create_server(("127.0.0.1", 0))
        with server, socket.create_connection(server.getsockname(), timeout=5):
            pass
    """)


def test_a_test_that_dials_outside_loopback_fails_naming_the_address(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    inner = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                            "-p", "tests.conftest", "-c", "/dev/null", "--rootdir", str(tmp_path),
                            str(tmp_path / "test_inner.py")], cwd=REPO, capture_output=True, text=True, timeout=300)
    out = inner.stdout + inner.stderr
    assert inner.returncode == 1, out
    assert "3 failed, 1 passed" in out, out
    assert "test_inner.py::test_dials_a_host_of_the_internet" in out
    assert "a connection to 192.0.2.1:80 refused (tests/network_guard)" in out
    assert "test_inner.py::test_starts_a_process_that_dials_and_swallows_the_refusal" in out
    assert "refused by the tests' guard" in out
    assert "a connection to 198.51.100.7:443 (pid" in out
    assert "a bucket path opened as a local file: gs:/tfxd-tests/runs/summary.json (open) (pid" in out


def test_bucket_paths_are_refused_to_local_file_functions_only():
    refusal = network_guard.bucket_path_refusal
    assert refusal("open", ("gs://b/x.json", "w", 0)) == "a bucket path opened as a local file: gs://b/x.json (open)"
    assert refusal("os.mkdir", (b"/work/gs:/b/runs", 0o777, -1)) is not None
    assert refusal("os.replace", ("/tmp/a", "s3:/b/a", -1, -1)) is not None
    assert refusal("open", ("/tmp/tags:/x", "r", 0)) is None
    assert refusal("open", ("/tmp/logs/run.log", "a", 0)) is None
    assert refusal("socket.connect", (None, ("gs://b", 1))) is None


def test_loopback_and_the_suites_own_hosts_are_allowed(monkeypatch):
    assert network_guard.refusal(socket.AF_INET, ("127.0.0.1", 80)) is None
    assert network_guard.refusal(socket.AF_INET6, ("::1", 80, 0, 0)) is None
    assert network_guard.refusal(socket.AF_INET, ("localhost", 80)) is None
    assert network_guard.refusal(socket.AF_INET, ("0.0.0.0", 80)) is None
    assert network_guard.refusal(socket.AF_UNIX, "/run/some.sock") is None
    assert network_guard.refusal(socket.AF_INET, ("10.213.0.2", 2222)) == "10.213.0.2:2222"
    monkeypatch.setenv(network_guard.HOSTS_ENV, "10.213.0.0/24")
    assert network_guard.refusal(socket.AF_INET, ("10.213.0.2", 2222)) is None
    assert network_guard.refusal(socket.AF_INET, ("10.213.1.2", 2222)) == "10.213.1.2:2222"
