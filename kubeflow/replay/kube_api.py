"""A loopback Kubernetes API server speaking the part of the API the Trainer's job launcher uses: the jobs
of the operators it serves (JobKind: tfjobs of kubeflow.org/v1, trainjobs of trainer.kubeflow.org/v1alpha1;
create, get, list, watch, delete), API discovery of them, and pods (list by label, logs), in namespaces.

It refuses what a cluster with those operators refuses, so that what passes here passes there: a request
without the bearer token (401), a namespace in the body other than the request's, a name that exists
(409), and what each kind's admission refuses (its JobKind.validate: training_operator.py for a TFJob,
trainer_v2.py for a TrainJob). A controller (training_operator.py, trainer_v2.py, or a test's) is told of
each job created and deleted, and sets the pods and the job's status through this object.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

DNS_1035 = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
_JOBS = re.compile(r"^/apis/([^/]+)/([^/]+)/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)(/log)?)?$")
_DISCOVERY = re.compile(r"^/apis/([^/]+)/([^/]+)/?$")


class Invalid(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


@dataclass(frozen=True)
class JobKind:
    """An operator's job as this API serves it: its names, the label its controller puts on the job's pods
    (with the job's name), and what the API server and the operator's webhooks refuse of a new one
    (``validate(body, namespace)`` raises Invalid)."""

    group: str
    version: str
    plural: str
    kind: str
    pod_label: str
    validate: Callable[[dict[str, Any], str], None]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@dataclass(frozen=True)
class Replica:
    """A pod of an operator's job, as a local controller (local_operators.py) runs it: a process."""

    id: tuple[str, int]  # (replica type, index) for a TFJob, ("node", index) for a TrainJob
    pod: str  # its pod's name, and its log's
    container: dict[str, Any]  # the container that trains (its command and args run)
    env: dict[str, str]  # what the cluster gives that container: its own env and the operator's
    addresses: tuple[str, ...]  # every replica's cluster address (host:port), as TF_CONFIG names them
    address: str  # its own, of addresses


class KubeApi:
    """The server and its objects, serving the jobs of ``kinds``. ``controller`` has created(job) and
    deleted(job). It listens on ``host`` (loopback; a test whose tasks run in a network namespace of its own
    gives the host's end of the namespace's link)."""

    def __init__(self, kinds: tuple[JobKind, ...], controller=None, token: str | None = None,
                 host: str = "127.0.0.1") -> None:
        self.kinds = {(kind.group, kind.version, kind.plural): kind for kind in kinds}
        self.controller = controller
        self.token = token or uuid.uuid4().hex
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> a log file's path
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (resource version, type, job)
        self.requests: list[tuple[str, str, str]] = []  # (verb, resource, namespace), for the RBAC check
        self.lock = threading.Condition()
        self.version = 1
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # the task log is not the place for an access log
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                api._serve(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                api._serve(self, "POST")

            def do_DELETE(self) -> None:  # noqa: N802
                api._serve(self, "DELETE")

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="tfxd-kube-api", daemon=True)

    @property
    def url(self) -> str:
        return "http://{}:{}".format(*self.server.server_address[:2])

    def __enter__(self) -> KubeApi:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, path: str, namespace: str) -> str:
        """A kubeconfig for this server, its context in ``namespace``; the kubernetes client reads it."""
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "tfxd-replay",
                  "clusters": [{"name": "tfxd-replay", "cluster": {"server": self.url}}],
                  "users": [{"name": "tfxd-replay", "user": {"token": self.token}}],
                  "contexts": [{"name": "tfxd-replay", "context": {"cluster": "tfxd-replay", "user": "tfxd-replay",
                                                                   "namespace": namespace}}]}
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(config, handle)
        return path

    # what a controller calls

    def set_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        with self.lock:
            job = self.jobs.get((namespace, name))
            if job is not None and job.get("status") != status:
                job["status"] = status
                self._touch(job)

    def put_pod(self, pod: dict[str, Any], log_path: str | None = None) -> None:
        with self.lock:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            self.pods[key] = pod
            if log_path:
                self.logs[key] = log_path
            self._touch(pod)

    def remove_pods(self, namespace: str, job: str, only: set[str] | None = None) -> None:
        """Delete the job's pods (those in phases ``only``, if given)."""
        with self.lock:
            label = self._pod_label(namespace, job)
            for key, pod in list(self.pods.items()):
                labels = pod["metadata"].get("labels", {})
                if key[0] == namespace and labels.get(label) == job and (
                        only is None or pod.get("status", {}).get("phase") in only):
                    del self.pods[key]
            self.lock.notify_all()

    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        with self.lock:
            label = self._pod_label(namespace, job)
            return [json.loads(json.dumps(pod)) for (ns, _), pod in self.pods.items() if ns == namespace
                    and pod["metadata"].get("labels", {}).get(label) == job]

    def finish_delete(self, namespace: str, name: str) -> None:
        """The controller has stopped the job's pods: a foreground deletion completes."""
        self.remove_pods(namespace, name)
        with self.lock:
            job = self.jobs.pop((namespace, name), None)
            if job is not None:
                self.version += 1
                self.events.append((self.version, "DELETED", json.loads(json.dumps(job))))
                self.lock.notify_all()

    # the HTTP side

    def _kind_of(self, job: dict[str, Any]) -> JobKind | None:
        return next((kind for kind in self.kinds.values() if (kind.api_version, kind.kind) == (
            job.get("apiVersion"), job.get("kind"))), None)

    def _pod_label(self, namespace: str, job: str) -> str | None:
        kind = self._kind_of(self.jobs.get((namespace, job)) or {})
        return kind.pod_label if kind else None

    def _touch(self, obj: dict[str, Any], kind: str = "MODIFIED") -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if self._kind_of(obj) is not None:
            self.events.append((self.version, kind, json.loads(json.dumps(obj))))
        self.lock.notify_all()

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(handler.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        payload = handler.rfile.read(length) if length else b""
        try:
            if handler.headers.get("Authorization") != f"Bearer {self.token}":
                raise Invalid(401, "Unauthorized", "Unauthorized")
            if (match := _JOBS.match(url.path)) and (kind := self.kinds.get(
                    (match.group(1), match.group(2), match.group(4)))):
                self._jobs(handler, method, kind, match.group(3), match.group(5), query, payload)
            elif (match := _PODS.match(url.path)) and method == "GET":
                self._pods(handler, match.group(1), match.group(2), bool(match.group(3)), query)
            elif (match := _DISCOVERY.match(url.path)) and method == "GET" and (listed := [
                    kind for kind in self.kinds.values() if (kind.group, kind.version) == match.groups()]):
                # API discovery, open to every authenticated account (the system:discovery ClusterRole): the
                # kinds a group/version serves; any group the cluster does not serve is a 404
                _reply(handler, 200, {"kind": "APIResourceList", "apiVersion": "v1",
                                      "groupVersion": listed[0].api_version,
                                      "resources": [{"name": kind.plural, "singularName": kind.kind.lower(),
                                                     "namespaced": True, "kind": kind.kind,
                                                     "verbs": ["create", "delete", "get", "list", "watch"]}
                                                    for kind in listed]})
            else:
                raise Invalid(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        except Exception as exc:  # noqa: BLE001 - a server error is an answer, not a dropped connection
            if not isinstance(exc, Invalid):
                exc = Invalid(500, "InternalError", f"{type(exc).__name__}: {exc}")
            _reply(handler, exc.code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": exc.message, "reason": exc.reason, "code": exc.code})

    def _jobs(self, handler, method: str, kind: JobKind, namespace: str, name: str | None, query: dict[str, str],
              payload: bytes) -> None:
        verb = {"POST": "create", "DELETE": "delete"}.get(method) or (
            "get" if name else "watch" if query.get("watch", "").lower() == "true" else "list")
        self.requests.append((verb, kind.plural, namespace))
        if verb == "create":
            body = json.loads(payload or b"{}")
            if (body.get("apiVersion"), body.get("kind")) != (kind.api_version, kind.kind):
                raise Invalid(400, "BadRequest", f"the object is not a {kind.api_version} {kind.kind}")
            if (body.get("metadata") or {}).get("namespace", namespace) != namespace:
                raise Invalid(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                              "sent on the request")
            kind.validate(body, namespace)
            with self.lock:
                key = (namespace, body["metadata"]["name"])
                if key in self.jobs:
                    raise Invalid(409, "AlreadyExists", f'{kind.plural}.{kind.group} "{key[1]}" already exists')
                # what SET_ON_CREATE names, and a status: as_sent takes them away again
                body["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
                body["status"] = {}
                self.jobs[key] = body
                self._touch(body, "ADDED")
                created = json.loads(json.dumps(body))
            if self.controller is not None:
                self.controller.created(created)
            _reply(handler, 201, created)
        elif verb == "get" and name:
            _reply(handler, 200, self._job(kind, namespace, name))
        elif verb == "delete":
            if not name:  # the cluster's deletecollection: the launcher never asks it, and this stand-in has none
                raise Invalid(405, "MethodNotAllowed", "this stand-in deletes one job by name, not a collection")
            options = json.loads(payload or b"{}")
            with self.lock:
                job = self._job(kind, namespace, name)
                stored = self.jobs[(namespace, name)]
                stored["metadata"]["deletionTimestamp"] = now()
                if options.get("propagationPolicy") == "Foreground":
                    stored["metadata"]["finalizers"] = ["foregroundDeletion"]
                self._touch(stored)
            if self.controller is not None:
                self.controller.deleted(job)
            else:
                self.finish_delete(namespace, name)
            _reply(handler, 200, job)
        elif verb == "watch":
            self._watch(handler, kind, namespace, query)
        else:
            selected = _selected(query.get("fieldSelector"))
            with self.lock:
                items = [job for (ns, n), job in self.jobs.items() if ns == namespace and selected in (None, n)
                         and self._kind_of(job) == kind]
                _reply(handler, 200, {"apiVersion": kind.api_version, "kind": f"{kind.kind}List",
                                      "metadata": {"resourceVersion": str(self.version)}, "items": items})

    def _job(self, kind: JobKind, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get((namespace, name))
            if job is None or self._kind_of(job) != kind:
                raise Invalid(404, "NotFound", f'{kind.plural}.{kind.group} "{name}" not found')
            return json.loads(json.dumps(job))

    def _watch(self, handler, kind: JobKind, namespace: str, query: dict[str, str]) -> None:
        """Events after resourceVersion, one JSON line each, until timeoutSeconds."""
        name = _selected(query.get("fieldSelector"))
        since = int(query.get("resourceVersion") or 0)
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 30)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            while time.monotonic() < deadline:
                with self.lock:
                    fresh = [(v, event, obj) for v, event, obj in self.events if v > since and self._kind_of(obj) == kind
                             and obj["metadata"]["namespace"] == namespace and name in (None, obj["metadata"]["name"])]
                    if not fresh:
                        self.lock.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                        continue
                for version, event, obj in fresh:
                    _chunk(handler, json.dumps({"type": event, "object": obj}).encode() + b"\n")
                    since = version
            _chunk(handler, b"")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _pods(self, handler, namespace: str, name: str | None, log: bool, query: dict[str, str]) -> None:
        self.requests.append(("get" if log or name else "list", "pods/log" if log else "pods", namespace))
        if name is None:
            selector = dict(part.split("=", 1) for part in (query.get("labelSelector") or "").split(",") if part)
            with self.lock:
                items = [pod for (ns, _), pod in self.pods.items() if ns == namespace and all(
                    pod["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())]
                _reply(handler, 200, {"apiVersion": "v1", "kind": "PodList",
                                      "metadata": {"resourceVersion": str(self.version)}, "items": items})
            return
        with self.lock:
            if (namespace, name) not in self.pods:
                raise Invalid(404, "NotFound", f'pods "{name}" not found')
            path = self.logs.get((namespace, name))
        text = ""
        if path:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        if query.get("tailLines"):
            text = "".join(text.splitlines(keepends=True)[-int(query["tailLines"]):])
        _reply(handler, 200, text.encode(), "text/plain")


def model_problems(value: Any, model: str) -> list[str]:
    """Fields of ``value`` that the kubernetes client's model ``model`` (its OpenAPI types) does not have,
    and values of the wrong JSON type, recursively."""
    from kubernetes import client

    kind = re.fullmatch(r"(list|dict)[\[(](.*)[\])]", model)
    if kind and kind.group(1) == "list":
        return [p for i, item in enumerate(value) for p in (f"[{i}]{q}" for q in model_problems(item, kind.group(2)))] \
            if isinstance(value, list) else [f": expected a list, got {type(value).__name__}"]
    if kind:
        inner = kind.group(2).split(", ", 1)[1]
        return [f"[{k}]{q}" for k, v in value.items() for q in model_problems(v, inner)] if isinstance(
            value, dict) else [f": expected a map, got {type(value).__name__}"]
    scalars: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "bool": bool, "float": (int, float),
                                                   "object": object, "datetime": str, "date": str}
    if model in scalars:
        return [] if isinstance(value, scalars[model]) else [f": expected {model}, got {type(value).__name__}"]
    cls = getattr(client, model)
    if not isinstance(value, dict):
        return [f": expected an object ({model}), got {type(value).__name__}"]
    fields = {json_name: cls.openapi_types[attr] for attr, json_name in cls.attribute_map.items()}
    problems = []
    for key, item in value.items():
        if key not in fields:
            problems.append(f".{key}: field not declared in schema")
        else:
            problems += [f".{key}{p}" for p in model_problems(item, fields[key])]
    return problems


def _selected(selector: str | None) -> str | None:
    if selector and selector.startswith("metadata.name="):
        return selector.split("=", 1)[1]
    return None


SET_ON_CREATE = ("uid", "creationTimestamp", "generation", "resourceVersion")  # metadata the API server adds; and a status


def as_sent(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored object as its client sent it: without the metadata and the status the API server set on
    create, so that it can be judged again as a request."""
    metadata = {k: v for k, v in stored["metadata"].items() if k not in SET_ON_CREATE}
    return {**{k: v for k, v in stored.items() if k != "status"}, "metadata": metadata}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _reply(handler, code: int, body: Any, content_type: str = "application/json") -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _chunk(handler, data: bytes) -> None:
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()
