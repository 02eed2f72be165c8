"""`tfxd submit`: one run of a compiled pipeline on Vertex AI Pipelines or on Kubeflow Pipelines.

google-cloud-aiplatform and kfp are imported inside the functions: the CLI must start fast and only
these verbs pay for the SDKs. Every endpoint is an optional parameter that defaults to the real
service (the spec's host for Kubeflow), so tests point them at local fakes and nothing else changes.
Runs carry labels with the hashes of the resolved spec and of the compiled file, so a run found in
the console can be traced back to the spec that made it.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import io
import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from tfxd.files import is_uri
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.placement import Placement
from tfxd.pipeline.spec.render import to_yaml
from tfxd.pipeline.spec.targets import KubeflowTarget, VertexTarget

# Vertex's PipelineState names without their PIPELINE_STATE_ prefix; the SDK counts PAUSED as done too.
VERTEX_DONE = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "PAUSED"})
VERTEX_FAILED = frozenset({"FAILED", "CANCELLED"})
# KFP v2beta1 RuntimeState.
KFP_DONE = frozenset({"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"})
KFP_FAILED = frozenset({"FAILED", "CANCELED"})
_UNKNOWN = frozenset({"", "UNSPECIFIED", "RUNTIME_STATE_UNSPECIFIED"})
LABEL_MAX = 63  # Google Cloud label values: at most 63 characters
# kfp.Client and aiplatform.PipelineJob overwrite every task's caching option with enable_caching unless it
# is None: None keeps the compiled file's own (ExampleGen never cached where the cache cannot see its data,
# kubeflow/compile.py says why; every other task cached).
KEEP_COMPILED_CACHING = None

OnState = Callable[[str], None]


class RunFailed(RuntimeError):
    """A submitted run ended in a failed state; the message names the state and the service's error."""

    def __init__(self, message: str, *, state: str, name: str, url: str | None) -> None:
        super().__init__(message)
        self.state = state
        self.name = name
        self.url = url


# ------------------------------------------------------------------ hashes and labels


def spec_hash(spec: Spec) -> str:
    """The resolved spec's identity: sha256 of `tfxd render`'s YAML, 16 hex characters."""
    return hashlib.sha256(to_yaml(spec).encode("utf-8")).hexdigest()[:16]


def compiled_hash(path: str) -> str:
    """The compiled file's identity (its bytes), 16 hex characters: what a schedule freezes."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def labels(spec: Spec, compiled_path: str) -> dict[str, str]:
    """The labels tfxd puts on Vertex runs and schedules: the spec, the compiled file, the pipeline."""
    return {"tfxd-spec": spec_hash(spec), "tfxd-compiled": compiled_hash(compiled_path),
            "tfxd-pipeline": spec.name[:LABEL_MAX]}


def _compiled_job(path: str) -> dict[str, Any]:
    """The compiled file as a PipelineJob dict; {} when it is not one (a bare PipelineSpec YAML)."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) and "pipelineSpec" in document else {}


def _file_labels(path: str) -> dict[str, str]:
    """The compiled PipelineJob's own labels (PipelineJob(labels=...) would otherwise drop them)."""
    found = _compiled_job(path).get("labels")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def cluster_pipeline_root(spec: Spec, target: str) -> str | None:
    """The pipeline root `tfxd compile` puts on a target (pipeline.spec.placement: <bucket>/<name>/pipeline);
    None when the spec names no bucket for it (Kubeflow then uses the cluster's default)."""
    placement = Placement(LoadedSpec(spec, ""), target)  # the cluster root needs no spec file path
    return placement.pipeline_root() if placement.cluster_root() else None


def vertex_pipeline_root(spec: Spec, compiled_path: str) -> str:
    """The compiled job's own root (its runtimeConfig.gcsOutputDirectory) wins: the compiler placed the
    pipeline's files relative to it. A file without one gets the same rule the compiler applies."""
    job = _compiled_job(compiled_path)
    found = (job.get("runtimeConfig") or {}).get("gcsOutputDirectory") or \
        (job.get("pipelineSpec") or {}).get("defaultPipelineRoot")
    return str(found or cluster_pipeline_root(spec, "vertex") or vertex_target(spec).root)


# ------------------------------------------------------------------ SDK access


def vertex_target(spec: Spec) -> VertexTarget:
    if spec.targets.vertex is None:
        raise ValueError(f"the spec {spec.name!r} has no targets.vertex section")
    return spec.targets.vertex


def kubeflow_target(spec: Spec) -> KubeflowTarget:
    if spec.targets.kubeflow is None:
        raise ValueError(f"the spec {spec.name!r} has no targets.kubeflow section")
    return spec.targets.kubeflow


def vertex_sdk(api_endpoint: str | None = None, credentials: Any = None) -> Any:
    """The aiplatform module, its clients aimed at `api_endpoint` or, by default, the regional service.

    aiplatform keeps the endpoint and credentials in process-wide state, so every call sets them again
    (an earlier call must not leak into this one); the credentials go there too so that the SDK's own
    side calls (the bucket check of `PipelineJob.submit`) use them. An endpoint with a scheme
    (http://127.0.0.1:PORT) needs the REST transport: its URL keeps the scheme, gRPC would not.
    """
    with quiet():  # its import warns about the installed google-cloud-storage
        from google.cloud import aiplatform
        from google.cloud.aiplatform import initializer

    config = initializer.global_config
    config._api_endpoint = None
    config._api_transport = None
    config._credentials = None  # type: ignore[assignment]  # aiplatform starts it so, annotated or not
    if api_endpoint or credentials is not None:
        # init() without a project would pick REST by itself; say which, always.
        transport = "rest" if api_endpoint and is_uri(api_endpoint) else "grpc"
        aiplatform.init(api_endpoint=api_endpoint, api_transport=transport, credentials=credentials)
    return aiplatform


def kfp_client(host: str | None) -> Any:
    """A kfp.Client on `host` (None: KF_PIPELINES_ENDPOINT, then the in-cluster service, as kfp does)."""
    import kfp

    with quiet():
        return kfp.Client(host=host)


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Keep the SDKs' own chatter off tfxd's stdout: aiplatform logs INFO progress to stdout through
    handlers it installs, kfp prints links and warns that it needs KFP >= 2.0.0-beta.2. tfxd reports
    the outcome itself; the SDKs' warnings and errors still get through, on stderr."""
    drop = _BelowWarning()
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
               if name.startswith("google.cloud.aiplatform")]
    moved: list[tuple[logging.StreamHandler[Any], Any]] = []
    for logger in loggers:
        logger.addFilter(drop)
        for handler in logger.handlers:
            if (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
                    and handler.stream is not sys.stderr):
                moved.append((handler, handler.setStream(sys.stderr)))
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)
        for handler, stream in moved:
            handler.setStream(stream)


# ------------------------------------------------------------------ waiting


def follow(first: str, fetch: Callable[[], str], done: frozenset[str], *, on_state: OnState | None,
           poll_interval: float, timeout: float | None) -> str:
    """Poll until a state in `done`; call `on_state` once per change of state, not once per poll."""
    deadline = None if timeout is None else time.monotonic() + timeout
    state, reported = first, None
    while True:
        if state not in _UNKNOWN and state != reported:
            reported = state
            if on_state is not None:
                on_state(state)
        if state in done:
            return state
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"still {state or 'unknown'} after {timeout:g} s")
        time.sleep(poll_interval)
        state = fetch()


# ------------------------------------------------------------------ Vertex AI


def vertex_state(state: Any) -> str:
    """PipelineState enum -> 'RUNNING' (its name without the PIPELINE_STATE_ prefix)."""
    return getattr(state, "name", str(state)).removeprefix("PIPELINE_STATE_")


def vertex_console_url(target: VertexTarget, resource_name: str) -> str:
    job_id = resource_name.rsplit("/", 1)[-1]
    return (f"https://console.cloud.google.com/vertex-ai/locations/{target.region}/pipelines/runs/"
            f"{job_id}?project={target.project}")


def vertex_job(spec: Spec, compiled_path: str, *, credentials: Any = None,
               api_endpoint: str | None = None) -> Any:
    """The PipelineJob tfxd submits or schedules: each task cached as the compiled file says, labelled with
    the spec's hashes."""
    target = vertex_target(spec)
    aiplatform = vertex_sdk(api_endpoint, credentials)
    with quiet():
        return aiplatform.PipelineJob(
            display_name=spec.name, template_path=compiled_path,
            pipeline_root=vertex_pipeline_root(spec, compiled_path),
            project=target.project, location=target.region,
            labels={**_file_labels(compiled_path), **labels(spec, compiled_path)},
            enable_caching=KEEP_COMPILED_CACHING, credentials=credentials)


def submit_vertex(spec: Spec, compiled_path: str, *, wait: bool = False, credentials: Any = None,
                  api_endpoint: str | None = None, on_state: OnState | None = None,
                  poll_interval: float = 10.0, timeout: float | None = None) -> dict[str, Any]:
    """Create one PipelineJob from the compiled file; with `wait`, follow it until it ends.

    Returns {"name", "state", "console_url", "url"}; raises RunFailed when it ends FAILED or CANCELLED.
    """
    target = vertex_target(spec)
    job = vertex_job(spec, compiled_path, credentials=credentials, api_endpoint=api_endpoint)
    with quiet():
        job.submit(service_account=target.service_account)
    name = job.resource_name
    url = vertex_console_url(target, name)
    state = vertex_state(job.gca_resource.state)
    if wait:
        def fetch() -> str:
            with quiet():
                return vertex_state(job.state)  # `state` GETs the job

        state = follow(state, fetch, VERTEX_DONE, on_state=on_state, poll_interval=poll_interval,
                       timeout=timeout)
        if state in VERTEX_FAILED:
            message = job.gca_resource.error.message or "no error message"
            raise RunFailed(f"Vertex AI pipeline job {name} ended {state}: {message}\n  see {url}",
                            state=state, name=name, url=url)
    elif on_state is not None and state not in _UNKNOWN:
        on_state(state)
    return {"name": name, "state": state, "console_url": url, "url": url}


# ------------------------------------------------------------------ Kubeflow Pipelines


def kubeflow_host(spec: Spec, host: str | None = None) -> str | None:
    """The KFP API endpoint: the argument, else the spec's, else KF_PIPELINES_ENDPOINT (kfp's own)."""
    found = host or kubeflow_target(spec).host or os.environ.get("KF_PIPELINES_ENDPOINT")
    return found.rstrip("/") if found else None


def submit_kubeflow(spec: Spec, compiled_path: str, *, wait: bool = False, host: str | None = None,
                    on_state: OnState | None = None, poll_interval: float = 10.0,
                    timeout: float | None = None) -> dict[str, Any]:
    """Create one run from the compiled package in the experiment named after the pipeline (a KFP
    package carries no pipeline root: the run gets the one `tfxd compile` would use, when the spec
    names a bucket); with `wait`, follow it until it ends.

    Returns {"run_id", "run_name", "experiment_id", "state", "url"}; raises RunFailed when it ends
    FAILED or CANCELED.
    """
    host = kubeflow_host(spec, host)
    client = kfp_client(host)
    run_name = f"{spec.name} {datetime.datetime.now():%Y-%m-%d %H-%M-%S}"
    with quiet():
        result = client.create_run_from_pipeline_package(
            compiled_path, arguments={}, run_name=run_name, experiment_name=spec.name,
            pipeline_root=cluster_pipeline_root(spec, "kubeflow"), enable_caching=KEEP_COMPILED_CACHING)
    run_id = result.run_id
    url = f"{host}/#/runs/details/{run_id}" if host else None
    state = result.run_info.state or ""
    if wait:
        last: list[Any] = [result.run_info]

        def fetch() -> str:
            last[0] = client.get_run(run_id)
            return last[0].state or ""

        state = follow(state, fetch, KFP_DONE, on_state=on_state, poll_interval=poll_interval, timeout=timeout)
        if state in KFP_FAILED:
            error = last[0].error
            message = (error.message if error is not None else None) or "no error message"
            raise RunFailed(f"Kubeflow run {run_id} ended {state}: {message}" + (f"\n  see {url}" if url else ""),
                            state=state, name=run_id, url=url)
    elif on_state is not None and state not in _UNKNOWN:
        on_state(state)
    return {"run_id": run_id, "run_name": run_name, "experiment_id": result.run_info.experiment_id,
            "state": state, "url": url}
