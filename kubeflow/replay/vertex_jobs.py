"""Vertex AI's JobService on this machine: the CustomJob a Vertex Trainer task sends, taken as Vertex takes
it and run as Vertex runs it.

TFX's VertexJobClient (tfx/extensions/google_cloud_ai_platform/training_clients.py) sends it through
google-cloud-aiplatform's v1 JobServiceClient, gRPC over TLS to `{region}-aiplatform.googleapis.com:443`,
with the credentials google.auth finds. Nothing of that is changed here: the task is given gRPC's own
proxy setting (`grpc_proxy`, an HTTP CONNECT proxy this module runs, which opens a tunnel for
`*-aiplatform.googleapis.com:443` only) and the roots gRPC trusts (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, a CA
made for the replay), and the tunnel leads to a gRPC server with a certificate for that name, serving
`google.cloud.aiplatform.v1.JobService` (the method paths and message types of
aiplatform_v1/services/job_service/transports/grpc.py): CreateCustomJob, GetCustomJob, CancelCustomJob.

A created job is refused, as Vertex refuses it, where it breaks the rules Vertex's documentation states
for worker pools (https://cloud.google.com/vertex-ai/docs/training/distributed-training: the first pool is
the primary replica alone, replicaCount 1; pools 1-3 are workers, parameter servers, evaluators; a pool
that runs says its machine and its container); Vertex's own validation is not public. Else each pool's
replicas run as local processes (``argv_for(container_spec)`` gives a replica's command) with the
environment Vertex gives a replica: CLUSTER_SPEC (`workerpoolN` pools, the task's pool and index, the
`cloud` environment; the page's #cluster-variables) and TF_CONFIG (chief, worker, ps; its #tf-config),
both of which aiplatform's own profiler reads (training_utils/cloud_profiler/plugins/tensorflow/
tf_profiler.py: a chief is `workerpool0` or `chief`), and CLOUD_ML_JOB_ID. Their cluster addresses
(`cmle-training-workerpool1-<job>-0:2222`) resolve on hosts of their own (``reach``, replica_hosts.py)
or are mapped to loopback ports (keys.ADDRESSES_ENV). GetCustomJob answers when the job has ended (a
long poll: TFX asks once right after creating it, then every 30 s, runner._POLLING_INTERVAL_IN_SECONDS).

A replica's end is taken as Vertex takes it (https://cloud.google.com/vertex-ai/docs/training/
understanding-training-service, "Restart workers during the training job" and "Handle common errors"):
the job succeeds when the primary replica exits 0, and the others are stopped. A replica that exits with
an error ("User code exception") or runs out of memory is a permanent error: the job fails with Vertex's
message, `The replica workerpool1-0 exited with a non-zero status of 1. Termination reason: Error.`
(error code 3, as Vertex's failed jobs carry it), and this service adds the replica's log. A replica
killed from outside (SIGKILL or SIGTERM: here what a VM lost to maintenance or preemption is to Vertex)
is restarted with the same hostname and environment, up to 5 times; past them, or when a replica ends by
SIGABRT or SIGSEGV (the exits the page calls possibly transient), the whole job is run again, up to 3
times, before it fails. An out-of-memory kill cannot be told from another SIGKILL here: both restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.cloud.aiplatform_v1.types import (
    CancelCustomJobRequest,
    CreateCustomJobRequest,
    CustomJob,
    GetCustomJobRequest,
    JobState,
)
from google.rpc import status_pb2

from tfxd import keys, stops
from tfxd.components.trainer.local_cluster import free_ports
from tfxd.components.trainer.replica_hosts import PORT, ReplicaHosts
from tfxd.kubeflow.replay.certificates import issued
from tfxd.trainer_module.cluster import VERTEX_POOLS

SERVICE = "google.cloud.aiplatform.v1.JobService"
ENDPOINT_SUFFIX = "-aiplatform.googleapis.com"  # TFX dials {region}-aiplatform.googleapis.com (training_clients.py)
PRIMARY = "workerpool0-0"  # the primary replica, which "reports status for the job as a whole" (the page above)
LONG_POLL_SECONDS = 600  # GetCustomJob waits at most this long for the job to end
REPLICA_RESTARTS = 5  # Vertex restarts a replica up to 5 times (the page above) ...
JOB_RETRIES = 3  # ... then runs the whole job again up to 3 times before it fails
USER_ERROR = 3  # the error code of a job failed by its code (Vertex's failed jobs carry `code: 3`)
CANCELLED = 1  # google.rpc's CANCELLED, a cancelled job's
_TRANSIENT = (signal.SIGABRT, signal.SIGSEGV)  # exits Vertex retries the job for (its "Handle common errors")
_ENDED = (JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED, JobState.JOB_STATE_CANCELLED)


def _credentials_in(env: Mapping[str, str]) -> bool:
    """Whether google.auth.default() finds credentials of the user's in ``env``: a key file, a metadata
    server named, or gcloud's application-default login (google/auth/_default.py, in its order)."""
    config = env.get("CLOUDSDK_CONFIG") or os.path.join(os.path.expanduser("~"), ".config", "gcloud")
    return bool(env.get("GOOGLE_APPLICATION_CREDENTIALS") or env.get("GCE_METADATA_HOST")
                or os.path.exists(os.path.join(config, "application_default_credentials.json")))


def refusal(job: CustomJob) -> str | None:
    """Why Vertex would refuse ``job``'s worker pools (the rules its documentation states), or None."""
    pools = list(job.job_spec.worker_pool_specs)
    if not pools or not 1 <= len(pools) <= len(VERTEX_POOLS):
        return f"a CustomJob has 1 to {len(VERTEX_POOLS)} worker pools, not {len(pools)}"
    if pools[0].replica_count != 1:
        return f"workerPoolSpecs[0] is the primary replica: its replicaCount must be 1, not {pools[0].replica_count}"
    for index, pool in enumerate(pools):
        if pool.replica_count and not pool.machine_spec.machine_type:
            return f"workerPoolSpecs[{index}].machineSpec.machineType is required"
        if pool.replica_count and not pool.container_spec.image_uri and not pool.python_package_spec.executor_image_uri:
            return f"workerPoolSpecs[{index}] needs a containerSpec.imageUri or a pythonPackageSpec"
    return None


@dataclass
class _Job:
    name: str
    sent: CustomJob
    state: int = JobState.JOB_STATE_RUNNING  # a JobState
    error: str = ""
    processes: dict[str, Any] = field(default_factory=dict)  # replica name (workerpool1-0) -> Popen
    logs: dict[str, str] = field(default_factory=dict)
    given: dict[str, dict[str, str]] = field(default_factory=dict)  # replica -> what Vertex set in its environment
    launches: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)  # replica -> argv, env
    restarts: dict[str, int] = field(default_factory=dict)  # replica -> restarts in this attempt
    retries: int = 0  # the whole job's
    hosts: ReplicaHosts | None = None


class VertexJobs:
    """The JobService's gRPC server and its proxy, as a context. ``log_dir``: the replicas' logs;
    ``argv_for(container_spec)``: a replica's command; ``env``: what every replica gets besides Vertex's;
    ``host``: where the proxy listens (where the task reaches it); ``reach``: hosts of their own for the
    replicas, reaching these addresses of this machine (None: loopback ports). ``sent`` keeps every
    CreateCustomJobRequest as it arrived."""

    def __init__(self, log_dir: str, argv_for: Callable[[dict[str, Any]], list[str]], env: dict[str, str] | None = None,
                 host: str = "127.0.0.1", reach: dict[str, list[str]] | None = None, cwd: str | None = None) -> None:
        self.log_dir, self.argv_for, self.env, self.host, self.reach = log_dir, argv_for, env or {}, host, reach
        self.cwd = cwd
        self.sent: list[CreateCustomJobRequest] = []
        self.jobs: dict[str, _Job] = {}
        self.changed = threading.Condition()
        self.folder = tempfile.mkdtemp(prefix="tfxd-vertex-")
        self.ca, cert, key = issued(Path(self.folder), ("*.googleapis.com",), "jobs")
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
            "CreateCustomJob": grpc.unary_unary_rpc_method_handler(
                self._create, CreateCustomJobRequest.deserialize, CustomJob.serialize),
            "GetCustomJob": grpc.unary_unary_rpc_method_handler(
                self._get, GetCustomJobRequest.deserialize, CustomJob.serialize),
            "CancelCustomJob": grpc.unary_unary_rpc_method_handler(
                self._cancel, CancelCustomJobRequest.deserialize, lambda _: b"")}),))
        credentials = grpc.ssl_server_credentials([(Path(key).read_bytes(), Path(cert).read_bytes())])
        self.port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.proxy = _Proxy((host, 0), ("127.0.0.1", self.port))
        self.stopping = threading.Event()
        self.monitor = threading.Thread(target=self._monitor, name="tfxd-vertex-jobs", daemon=True)

    def __enter__(self) -> VertexJobs:
        os.makedirs(self.log_dir, exist_ok=True)
        self.server.start()
        threading.Thread(target=self.proxy.serve_forever, name="tfxd-vertex-proxy", daemon=True).start()
        self.monitor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        with self.changed:
            for job in list(self.jobs.values()):
                self._stop(job)
            self.changed.notify_all()  # a GetCustomJob waiting answers now
        self.proxy.shutdown()
        self.proxy.server_close()
        self.server.stop(grace=None)
        shutil.rmtree(self.folder, ignore_errors=True)

    def environment(self, task_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the Trainer task needs to reach this JobService as Vertex: gRPC's proxy and its roots; and,
        where ``task_env`` gives google.auth nothing to find (no key file, no metadata server, no gcloud
        login), a service-account key made for the replay: aiplatform signs its own token with it (a
        self-signed JWT, its `always_use_jwt_access`), which this service takes unchecked, so no token
        server is asked."""
        given = {"grpc_proxy": f"http://{self.host}:{self.proxy.server_address[1]}",
                 "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": self.ca}
        if task_env is not None and not _credentials_in(task_env):
            given["GOOGLE_APPLICATION_CREDENTIALS"] = self._key()
        return given

    def _key(self) -> str:
        path = os.path.join(self.folder, "service-account.json")
        if not os.path.exists(path):
            from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - made on first use
            from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode("ascii")
            with open(path, "w", encoding="utf-8") as handle:
                json.dump({"type": "service_account", "project_id": "tfxd-replay", "private_key_id": "replay",
                           "private_key": pem, "client_email": "tfxd-replay@tfxd-replay.iam.gserviceaccount.com",
                           "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token"}, handle)
        return path

    def _create(self, request: CreateCustomJobRequest, context: grpc.ServicerContext) -> CustomJob:
        self.sent.append(request)
        problem = refusal(request.custom_job)
        if problem is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        job_id = uuid.uuid4().hex[:12]
        job = _Job(f"{request.parent}/customJobs/{job_id}", request.custom_job)
        with self.changed:
            self.jobs[job.name] = job
            self._start(job, job_id)
        return self._view(job)

    def _get(self, request: GetCustomJobRequest, context: grpc.ServicerContext) -> CustomJob:
        with self.changed:
            job = self._job(request.name, context)
            self.changed.wait_for(lambda: job.state in _ENDED or self.stopping.is_set(), LONG_POLL_SECONDS)
            return self._view(job)

    def _cancel(self, request: CancelCustomJobRequest, context: grpc.ServicerContext) -> None:
        with self.changed:
            self._end(self._job(request.name, context), JobState.JOB_STATE_CANCELLED, "cancelled")

    def _job(self, name: str, context: grpc.ServicerContext) -> _Job:
        job = self.jobs.get(name)
        if job is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"CustomJob {name} not found")
            raise AssertionError("unreachable: abort raises")
        return job

    def _view(self, job: _Job) -> CustomJob:
        view = CustomJob(name=job.name, display_name=job.sent.display_name, job_spec=job.sent.job_spec,
                         labels=dict(job.sent.labels), state=job.state)
        if job.error:
            cancelled = job.state == JobState.JOB_STATE_CANCELLED
            view.error = status_pb2.Status(code=CANCELLED if cancelled else USER_ERROR, message=job.error)
        return view

    def _start(self, job: _Job, job_id: str) -> None:
        """Every replica of every pool, with its environment; on hosts of their own given ``reach``."""
        pools = [(f"workerpool{p}", pool) for p, pool in enumerate(job.sent.job_spec.worker_pool_specs)]
        addresses = {name: [f"cmle-training-{name}-{job_id}-{i}:{PORT}" for i in range(pool.replica_count)]
                     for name, pool in pools}
        cluster = {VERTEX_POOLS[name]: members for name, members in addresses.items()
                   if members and VERTEX_POOLS[name] != "evaluator"}
        mapped: dict[str, str] = {}
        replicas = {f"{name}-{i}": address.rsplit(":", 1)[0] for name, members in addresses.items()
                    for i, address in enumerate(members)}
        if self.reach is not None:
            job.hosts = ReplicaHosts(replicas, self.reach).__enter__()
        else:
            ports = iter(free_ports(len(replicas)))
            mapped = {address: f"localhost:{next(ports)}" for members in addresses.values() for address in members}
        for name, pool in pools:
            container = type(pool.container_spec).to_dict(pool.container_spec)
            for index in range(pool.replica_count):
                task = {"type": name, "index": index, "trial": ""}
                replica = f"{name}-{index}"
                job.given[replica] = {
                    "CLOUD_ML_JOB_ID": job_id,
                    "CLUSTER_SPEC": json.dumps({"cluster": addresses, "environment": "cloud", "task": task}),
                    "TF_CONFIG": json.dumps({"cluster": cluster, "environment": "cloud",
                                             "task": {**task, "type": VERTEX_POOLS[name]}})}
                env = {**os.environ, **self.env, **job.given[replica]}
                env.update({keys.ADDRESSES_ENV: json.dumps(mapped)} if mapped else {})
                argv = self.argv_for(container)
                if job.hosts is not None:
                    argv = job.hosts.hosts[replica].command(argv)
                job.logs[replica] = os.path.join(self.log_dir, f"{job_id}-{replica}.log")
                job.launches[replica] = (argv, env)
                self._launch(job, replica)

    def _launch(self, job: _Job, replica: str, again: str | None = None) -> None:
        """``replica``'s process; started ``again`` (why) it appends to its log, as Cloud Logging carries
        a restarted replica's story on under its name."""
        argv, env = job.launches[replica]
        with open(job.logs[replica], "a" if again else "w", encoding="utf-8") as log:
            if again:
                log.write(f"\n---- replay: {again} ----\n")
                log.flush()
            job.processes[replica] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL, env=env, cwd=self.cwd)

    def _monitor(self) -> None:
        while not self.stopping.wait(0.3):
            with self.changed:
                for job in [j for j in self.jobs.values() if j.state not in _ENDED]:
                    self._follow(job)

    def _follow(self, job: _Job) -> None:
        """The job's state from its replicas' (the module's docstring): succeeded when the primary replica
        exited 0 (the others, parameter servers and ParameterServer workers among them, which serve until
        stopped, are then stopped); a replica killed from outside restarted; else failed, or run again."""
        codes = {name: process.poll() for name, process in job.processes.items()}
        if codes.get(PRIMARY) == 0:
            self._end(job, JobState.JOB_STATE_SUCCEEDED, "")
            return
        for replica, code in codes.items():
            if code in (None, 0):
                continue
            status = code if code >= 0 else 128 - code  # as the container's exit status reads
            said = f"The replica {replica} exited with a non-zero status of {status}."
            restarts = job.restarts.get(replica, 0)
            if stops.by_signal(code) and status - 128 not in _TRANSIENT and restarts < REPLICA_RESTARTS:
                job.restarts[replica] = restarts + 1
                self._launch(job, replica, f"{said} Vertex restarts it with the same hostname (restart "
                                           f"{restarts + 1} of {REPLICA_RESTARTS})")
            elif stops.by_signal(code) and job.retries < JOB_RETRIES:
                self._retry(job, f"{said} Vertex runs the job again (retry {job.retries + 1} of {JOB_RETRIES})")
            else:
                self._end(job, JobState.JOB_STATE_FAILED, f"{said} Termination reason: Error. Its log (the "
                          f"replay's): {job.logs[replica]}")
            return

    def _retry(self, job: _Job, why: str) -> None:
        """The whole job run again: every replica stopped and started anew, on the same hosts."""
        job.retries += 1
        job.restarts.clear()
        self._kill(job)
        for replica in job.launches:
            self._launch(job, replica, why)

    def _end(self, job: _Job, state: int, error: str) -> None:
        self._stop(job)  # ended only once every replica is
        job.state, job.error = state, error
        self.changed.notify_all()

    @staticmethod
    def _kill(job: _Job) -> None:
        """Every replica of ``job`` still running, killed and reaped."""
        for process in job.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    @staticmethod
    def _stop(job: _Job) -> None:
        """``job`` over: its replicas killed, their hosts removed."""
        VertexJobs._kill(job)
        if job.hosts is not None:
            job.hosts.__exit__()
            job.hosts = None


class _Proxy(socketserver.ThreadingTCPServer):
    """gRPC's HTTP CONNECT proxy (grpc_proxy): a tunnel to the JobService for `*-aiplatform.googleapis.com:443`,
    403 for any other target."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], service: tuple[str, int]) -> None:
        self.service = service
        super().__init__(address, _Tunnel)


class _Tunnel(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        client: socket.socket = self.request
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 8192:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
        method, target = (head.split(b"\r\n", 1)[0].decode("latin-1").split(" ") + ["", ""])[:2]
        host, _, port = target.rpartition(":")
        if method != "CONNECT" or not host.endswith(ENDPOINT_SUFFIX) or port != "443":
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        with socket.create_connection(self.server.service) as upstream:  # type: ignore[attr-defined]
            for end in (client, upstream):
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            rest = head.split(b"\r\n\r\n", 1)[1]
            if rest:
                upstream.sendall(rest)
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join(timeout=5)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """What ``source`` sends, on to ``sink``, until it closes; then ``sink`` is told so."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
