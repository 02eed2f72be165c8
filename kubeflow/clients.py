"""What the Kubeflow Pipelines and Vertex AI targets share: the services' SDK clients (imported inside the
functions, so the CLI starts fast and only the verbs that call a service pay for its SDK), the hashes that
trace a run or a schedule back to its spec and compiled file, the compiled file read back, and the wait
for a run's end. The targets themselves are kubeflow/kubeflow_pipelines.py and kubeflow/vertex.py.

Every endpoint is an optional parameter that defaults to the real service (the spec's host for Kubeflow),
so tests point them at local fakes and nothing else changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from tfxd import patches
from tfxd.files import is_uri
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.placement import Placement
from tfxd.pipeline.spec.render import to_yaml

UNKNOWN_STATES = frozenset({"", "UNSPECIFIED", "RUNTIME_STATE_UNSPECIFIED"})

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


# ------------------------------------------------------------------ hashes and the compiled file


def spec_hash(spec: Spec) -> str:
    """The resolved spec's identity: sha256 of `tfxd render`'s YAML, 16 hex characters."""
    return hashlib.sha256(to_yaml(spec).encode("utf-8")).hexdigest()[:16]


def compiled_hash(path: str) -> str:
    """The compiled file's identity (its bytes), 16 hex characters: what a schedule freezes."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def compiled_job(path: str) -> dict[str, Any]:
    """The compiled file as a PipelineJob dict; {} when it is not one (a bare PipelineSpec YAML)."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) and "pipelineSpec" in document else {}


def cluster_pipeline_root(spec: Spec, target: str) -> str | None:
    """The pipeline root `tfxd compile` puts on a target (pipeline.spec.placement: <bucket>/<name>/pipeline);
    None when the spec names no bucket for it (Kubeflow then uses the cluster's default)."""
    placement = Placement(LoadedSpec(spec, ""), target)  # the cluster root needs no spec file path
    return placement.pipeline_root() if placement.cluster_root() else None


# ------------------------------------------------------------------ SDK access


def vertex_sdk(api_endpoint: str | None = None, credentials: Any = None) -> Any:
    """The aiplatform module, its clients aimed at `api_endpoint` or, by default, the regional service.

    aiplatform keeps the endpoint and credentials in process-wide state, so every call sets them again
    (patch aiplatform.settings_reset); the credentials go there too so that the SDK's own
    side calls (the bucket check of `PipelineJob.submit`) use them. An endpoint with a scheme
    (http://127.0.0.1:PORT) needs the REST transport: its URL keeps the scheme, gRPC would not.
    """
    with quiet():  # its import warns about the installed google-cloud-storage
        from google.cloud import aiplatform

    patches.assigned("aiplatform.settings_reset", None)  # as aiplatform's settings start
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
        if state not in UNKNOWN_STATES and state != reported:
            reported = state
            if on_state is not None:
                on_state(state)
        if state in done:
            return state
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"still {state or 'unknown'} after {timeout:g} s")
        time.sleep(poll_interval)
        state = fetch()


def report(state: str, on_state: OnState | None) -> None:
    """A submitted run's first state, for a caller that does not wait (none while the service says none)."""
    if on_state is not None and state not in UNKNOWN_STATES:
        on_state(state)
