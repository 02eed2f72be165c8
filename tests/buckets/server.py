"""A Cloud Storage API server for a test, reached as a cluster reaches Cloud Storage.

fake-gcs-server (github.com/fsouza/fake-gcs-server, built by `make services` into build/services/) keeps the
objects, on the host's loopback. The processes under test run in a network namespace of the test's own
(`ip netns exec`), linked to the host by a veth pair, whose /etc/hosts (`ip netns exec` binds
/etc/netns/NAME/hosts over it) sends www.googleapis.com, storage.googleapis.com and metadata.google.internal
to the host's end of the link, where tests/buckets/front.py answers with a certificate of a CA made for the
test. So TensorFlow's GCS filesystem (TFX's fileio on a cluster) runs its own code, endpoints and TLS
included; google-cloud-storage and Beam's GCSIO reach the same front through STORAGE_EMULATOR_HOST;
everyone's token comes from the front's metadata server. Nothing is left running or configured when the
test ends. Needs root (the suite's CI runs as root).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.buckets.front import Front
from tests.network_guard.sitecustomize import HOSTS_ENV
from tfxd.kubeflow.replay.certificates import issued

REPO = Path(__file__).resolve().parents[2]
BINARY = REPO / "build" / "services" / "fake-gcs-server"
NETWORK = "10.203.0.0/16"  # the suite's own test hosts for buckets (TFXD_TESTS_HOSTS)
_SERVERS = itertools.count()  # a process may hold several servers at once (a module's and a test's)
GOOGLE_NAMES = ("www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com", "iamcredentials.googleapis.com",
                "metadata.google.internal")


@dataclass
class BucketServer:
    name: str  # the network namespace
    host: str  # the front's address, the host's end of the link
    http_port: int
    backend: tuple[str, int]
    front: Front
    ca: str

    def env(self) -> dict[str, str]:
        """The environment of a process in the namespace: what a cluster's pod has, and the emulator's
        name for the clients that honour it."""
        return {**os.environ, "STORAGE_EMULATOR_HOST": f"http://{self.host}:{self.http_port}",
                "GCE_METADATA_HOST": f"{self.host}:{self.http_port}", "GCE_METADATA_IP": f"{self.host}:{self.http_port}",
                "CURL_CA_BUNDLE": self.ca, "GOOGLE_CLOUD_PROJECT": "tfxd-tests"}

    def command(self, *args: str) -> list[str]:
        """``args`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *args]

    def run(self, *args: str, timeout: float = 900, env: dict[str, str] | None = None,
            **kwargs) -> subprocess.CompletedProcess:
        """``args`` run to their end in the namespace, with env() and ``env`` over it."""
        return subprocess.run(self.command(*args), env={**self.env(), **(env or {})}, capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    # the objects, read and written through fake-gcs-server's JSON API on loopback (the test's own view)
    def _url(self, path: str) -> str:
        return "http://{}:{}{}".format(*self.backend, path)

    def create_bucket(self, bucket: str) -> None:
        _call("POST", self._url("/storage/v1/b"), json.dumps({"name": bucket}).encode())

    def upload(self, bucket: str, name: str, data: bytes) -> None:
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        _call("POST", self._url(f"/upload/storage/v1/b/{bucket}/o?{query}"), data)

    def upload_folder(self, folder: Path, bucket: str, prefix: str) -> None:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            self.upload(bucket, f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}", path.read_bytes())

    def objects(self, bucket: str, prefix: str = "") -> list[str]:
        names, token = [], ""
        while True:
            query = urllib.parse.urlencode({"prefix": prefix, "pageToken": token, "maxResults": 1000})
            page = json.loads(_call("GET", self._url(f"/storage/v1/b/{bucket}/o?{query}")))
            names += [item["name"] for item in page.get("items", [])]
            token = page.get("nextPageToken", "")
            if not token:
                return names

    def read(self, bucket: str, name: str) -> bytes:
        return _call("GET", self._url(f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"))

    def delete(self, bucket: str, name: str) -> None:
        _call("DELETE", self._url(f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}"))

    def under(self, uri: str) -> tuple[str, str, list[str]]:
        """The bucket of ``uri`` (gs://bucket/prefix), its prefix as a folder's, and the object names under it."""
        bucket, _, prefix = uri.removeprefix("gs://").partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        return bucket, prefix, self.objects(bucket, prefix)

    def download(self, uri: str, folder: Path) -> Path:
        """The objects under ``uri`` (gs://bucket/prefix) copied into ``folder``, for the test's own readers
        (TFMA, a SavedModel loaded in the test's process, which is outside the namespace)."""
        bucket, prefix, names = self.under(uri)
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            target = folder / name.removeprefix(prefix)
            if name.endswith("/"):  # a folder's marker (TensorFlow's makedirs writes one): the folder, maybe empty
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(self.read(bucket, name))
        return folder


def _call(method: str, url: str, data: bytes | None = None) -> bytes:
    headers = {"Content-Type": "application/json" if url.endswith("/storage/v1/b") else "application/octet-stream"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - loopback, the test's server
        return answer.read()


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True)


@contextlib.contextmanager
def _namespace(name: str, index: int) -> Iterator[str]:
    """A network namespace linked to the host by a veth pair (a /30 of NETWORK); yields the host's end."""
    host, inside = f"10.203.{index >> 6}.{(index & 63) * 4 + 1}", f"10.203.{index >> 6}.{(index & 63) * 4 + 2}"
    outer, inner = f"{name[:11]}h", f"{name[:11]}n"
    hosts_dir = Path("/etc/netns") / name
    try:
        _sh("ip", "netns", "add", name)
        _sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        _sh("ip", "link", "set", inner, "netns", name)
        _sh("ip", "addr", "add", f"{host}/30", "dev", outer)
        _sh("ip", "link", "set", outer, "up")
        for command in (("ip", "addr", "add", f"{inside}/30", "dev", inner), ("ip", "link", "set", inner, "up"),
                        ("ip", "link", "set", "lo", "up")):
            _sh("ip", "netns", "exec", name, *command)
        hosts_dir.mkdir(parents=True, exist_ok=True)
        # as Kubernetes writes a pod's: its own name at its own address (Flink's JVM resolves it), and here
        # Google's names at the front
        (hosts_dir / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n"
                                         f"{inside} {socket.gethostname()}\n"
                                         f"{host} {' '.join(GOOGLE_NAMES)}\n", encoding="utf-8")
        yield host
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)  # the veth pair goes with it
        subprocess.run(["ip", "link", "del", outer], capture_output=True)
        shutil.rmtree(hosts_dir, ignore_errors=True)


@contextlib.contextmanager
def bucket_server(folder: Path) -> Iterator[BucketServer]:
    """fake-gcs-server, its front and a namespace for the processes under test; all gone on exit."""
    if not BINARY.is_file():
        raise RuntimeError(f"{BINARY} is missing: `make services` builds it (make test does)")
    folder.mkdir(parents=True, exist_ok=True)
    index = (os.getpid() * 8 + next(_SERVERS)) % 16384
    name = f"tfxdg{index}"
    port = _free_port()
    hosts = os.environ.get(HOSTS_ENV)
    os.environ[HOSTS_ENV] = ",".join(x for x in (hosts, NETWORK) if x)  # the test itself reaches the front
    with contextlib.ExitStack() as restore:
        restore.callback(lambda: os.environ.pop(HOSTS_ENV) if hosts is None else os.environ.update({HOSTS_ENV: hosts}))
        yield from _serving(folder, name, index, port)


def _serving(folder: Path, name: str, index: int, port: int) -> Iterator[BucketServer]:
    with _namespace(name, index) as host:
        http_port = _free_port(host)
        # the links in its answers (an object's mediaLink) name the front, where the clients can reach it
        server = subprocess.Popen(
            [str(BINARY), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
             "-external-url", f"http://{host}:{http_port}", "-public-host", "storage.googleapis.com",
             "-log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=open(folder / "fake-gcs-server.log", "wb"))  # noqa: SIM115
        front = None
        try:
            _wait_for(("127.0.0.1", port), server)
            ca, cert, key = issued(folder, GOOGLE_NAMES, "front")
            front = Front(host, http_port, ("127.0.0.1", port), cert, key).start()
            yield BucketServer(name, host, http_port, ("127.0.0.1", port), front, ca)
        finally:
            if front is not None:
                front.stop()
            server.terminate()
            server.wait(timeout=30)


def _wait_for(address: tuple[str, int], process: subprocess.Popen, deadline: float = 30) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if process.poll() is not None:
            raise RuntimeError(f"fake-gcs-server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(address, timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"fake-gcs-server did not listen on {address} within {deadline} s")
