"""A loopback Kubernetes API server speaking the part of the API a TFJob launcher uses: tfjobs
(kubeflow.org/v1: create, get, list, watch, delete) and pods (list by label, logs), in namespaces.

It refuses what a cluster with the Training Operator refuses, so that what passes here passes there:
a request without the bearer token (401), a TFJob body with a field the CRD does not have (the real
server would drop it silently, and the setting with it), a pod template that is not a PodTemplateSpec
(checked field by field against the kubernetes client's own models), what the operator's admission
webhook denies (training-operator v1.9, pkg/webhooks/tensorflow/tfjob_webhook.go: a DNS-1035 name, a
container named `tensorflow` with an image in every replica, at most one chief), an owner reference
without uid, and a name that exists (409). A controller (training_operator.py, or a test's) is told
of each TFJob created and deleted, and sets the pods and the job's status through this object.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tfxd import keys

DNS_1035 = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
_JOBS = re.compile(rf"^/apis/{keys.TFJob.GROUP}/{keys.TFJob.VERSION}/namespaces/([^/]+)/{keys.TFJob.PLURAL}(?:/([^/]+))?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)(/log)?)?$")
_DISCOVERY = re.compile(r"^/apis/([^/]+)/([^/]+)/?$")
SPEC_KEYS = {"enableDynamicWorker", "runPolicy", "successPolicy", "tfReplicaSpecs"}
RUN_POLICY_KEYS = {"activeDeadlineSeconds", "backoffLimit", "cleanPodPolicy", "managedBy", "schedulingPolicy",
                   "suspend", "ttlSecondsAfterFinished"}
REPLICA_KEYS = {"replicas", "restartPolicy", "template"}
ENUMS = {"cleanPodPolicy": {"All", "Running", "None"}, "restartPolicy": {"Always", "OnFailure", "Never", "ExitCode"}}


class Invalid(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class KubeApi:
    """The server and its objects. ``controller`` has created(job) and deleted(job)."""

    def __init__(self, controller=None, token: str | None = None) -> None:
        self.controller = controller
        self.token = token or uuid.uuid4().hex
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> a log file's path
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (resource version, type, tfjob)
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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="tfxd-kube-api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

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
            for key, pod in list(self.pods.items()):
                labels = pod["metadata"].get("labels", {})
                if key[0] == namespace and labels.get(keys.TFJob.JOB_NAME_LABEL) == job and (
                        only is None or pod.get("status", {}).get("phase") in only):
                    del self.pods[key]
            self.lock.notify_all()

    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(json.dumps(pod)) for (ns, _), pod in self.pods.items() if ns == namespace
                    and pod["metadata"].get("labels", {}).get(keys.TFJob.JOB_NAME_LABEL) == job]

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

    def _touch(self, obj: dict[str, Any], kind: str = "MODIFIED") -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if obj.get("kind") == keys.TFJob.KIND:
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
            if match := _JOBS.match(url.path):
                self._jobs(handler, method, match.group(1), match.group(2), query, payload)
            elif (match := _PODS.match(url.path)) and method == "GET":
                self._pods(handler, match.group(1), match.group(2), bool(match.group(3)), query)
            elif (match := _DISCOVERY.match(url.path)) and method == "GET" and match.groups() == (
                    keys.TFJob.GROUP, keys.TFJob.VERSION):
                # API discovery, open to every authenticated account (the system:discovery ClusterRole): a
                # cluster with the Training Operator lists tfjobs; any group it does not serve is a 404
                _reply(handler, 200, {"kind": "APIResourceList", "apiVersion": "v1",
                                      "groupVersion": f"{keys.TFJob.GROUP}/{keys.TFJob.VERSION}",
                                      "resources": [{"name": keys.TFJob.PLURAL, "singularName": "tfjob",
                                                     "namespaced": True, "kind": keys.TFJob.KIND,
                                                     "verbs": ["create", "delete", "get", "list", "watch"]}]})
            else:
                raise Invalid(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        except Exception as exc:  # noqa: BLE001 - a server error is an answer, not a dropped connection
            if not isinstance(exc, Invalid):
                exc = Invalid(500, "InternalError", f"{type(exc).__name__}: {exc}")
            _reply(handler, exc.code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": exc.message, "reason": exc.reason, "code": exc.code})

    def _jobs(self, handler, method: str, namespace: str, name: str | None, query: dict[str, str],
              payload: bytes) -> None:
        verb = {"POST": "create", "DELETE": "delete"}.get(method) or (
            "get" if name else "watch" if query.get("watch", "").lower() == "true" else "list")
        self.requests.append((verb, keys.TFJob.PLURAL, namespace))
        if verb == "create":
            body = json.loads(payload or b"{}")
            _validate(body, namespace)
            with self.lock:
                key = (namespace, body["metadata"]["name"])
                if key in self.jobs:
                    raise Invalid(409, "AlreadyExists", f'tfjobs.{keys.TFJob.GROUP} "{key[1]}" already exists')
                body["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
                body["status"] = {}
                self.jobs[key] = body
                self._touch(body, "ADDED")
                created = json.loads(json.dumps(body))
            if self.controller is not None:
                self.controller.created(created)
            _reply(handler, 201, created)
        elif verb == "get" and name:
            _reply(handler, 200, self._job(namespace, name))
        elif verb == "delete":
            if not name:  # the cluster's deletecollection: the launcher never asks it, and this stand-in has none
                raise Invalid(405, "MethodNotAllowed", "this stand-in deletes one TFJob by name, not a collection")
            options = json.loads(payload or b"{}")
            with self.lock:
                job = self._job(namespace, name)
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
            self._watch(handler, namespace, query)
        else:
            selected = _selected(query.get("fieldSelector"))
            with self.lock:
                items = [job for (ns, n), job in self.jobs.items() if ns == namespace and selected in (None, n)]
                _reply(handler, 200, {"apiVersion": f"{keys.TFJob.GROUP}/{keys.TFJob.VERSION}", "kind": "TFJobList",
                                      "metadata": {"resourceVersion": str(self.version)}, "items": items})

    def _job(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get((namespace, name))
            if job is None:
                raise Invalid(404, "NotFound", f'tfjobs.{keys.TFJob.GROUP} "{name}" not found')
            return json.loads(json.dumps(job))

    def _watch(self, handler, namespace: str, query: dict[str, str]) -> None:
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
                    fresh = [(v, kind, obj) for v, kind, obj in self.events if v > since and
                             obj["metadata"]["namespace"] == namespace and name in (None, obj["metadata"]["name"])]
                    if not fresh:
                        self.lock.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                        continue
                for version, kind, obj in fresh:
                    _chunk(handler, json.dumps({"type": kind, "object": obj}).encode() + b"\n")
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


def _validate(body: dict[str, Any], namespace: str) -> None:
    """The CRD's schema (its fields), the API server's metadata rules and the operator's webhook."""
    problems: list[str] = []
    metadata, spec = body.get("metadata") or {}, body.get("spec") or {}
    if body.get("apiVersion") != f"{keys.TFJob.GROUP}/{keys.TFJob.VERSION}" or body.get("kind") != keys.TFJob.KIND:
        problems.append(f"apiVersion/kind must be {keys.TFJob.GROUP}/{keys.TFJob.VERSION} {keys.TFJob.KIND}")
    if metadata.get("namespace", namespace) != namespace:
        raise Invalid(400, "BadRequest", "the namespace of the provided object does not match the namespace sent "
                      "on the request")
    for owner in metadata.get("ownerReferences") or []:
        for key in ("apiVersion", "kind", "name", "uid"):
            if not owner.get(key):
                problems.append(f"metadata.ownerReferences.{key}: Invalid value: \"\": {key} must not be empty")
    problems += [f"spec.{k}: field not declared in schema" for k in set(spec) - SPEC_KEYS]
    run_policy = spec.get("runPolicy") or {}
    problems += [f"spec.runPolicy.{k}: field not declared in schema" for k in set(run_policy) - RUN_POLICY_KEYS]
    if run_policy.get("cleanPodPolicy", "None") not in ENUMS["cleanPodPolicy"]:
        problems.append(f"spec.runPolicy.cleanPodPolicy: Unsupported value: {run_policy['cleanPodPolicy']!r}")
    replicas = spec.get("tfReplicaSpecs")
    if not replicas:
        problems.append("spec.tfReplicaSpecs: Required value: must be required")
    for kind, replica in (replicas or {}).items():
        at = f"spec.tfReplicaSpecs[{kind}]"
        problems += [f"{at}.{k}: field not declared in schema" for k in set(replica) - REPLICA_KEYS]
        if replica.get("restartPolicy", "Never") not in ENUMS["restartPolicy"]:
            problems.append(f"{at}.restartPolicy: Unsupported value: {replica['restartPolicy']!r}")
        problems += [f"{at}.template{p}" for p in model_problems(replica.get("template") or {}, "V1PodTemplateSpec")]
    if problems:
        raise Invalid(422, "Invalid", f"TFJob.{keys.TFJob.GROUP} \"{metadata.get('name')}\" is invalid: "
                      + "; ".join(problems))
    denied = webhook_problems(body)
    if denied:
        raise Invalid(403, "Forbidden", 'admission webhook "validator.tfjob.training-operator.kubeflow.org" denied '
                      "the request: " + "; ".join(denied))


def webhook_problems(body: dict[str, Any]) -> list[str]:
    name = body.get("metadata", {}).get("name") or ""
    problems = [] if re.match(DNS_1035, name) and len(name) <= 63 else [
        f"metadata.name: Invalid value: {name!r}: should match a DNS-1035 label"]
    chiefs = 0
    for kind, replica in (body.get("spec", {}).get("tfReplicaSpecs") or {}).items():
        containers = replica.get("template", {}).get("spec", {}).get("containers") or []
        at = f"spec.tfReplicaSpecs[{kind}].template.spec.containers"
        if not containers:
            problems.append(f"{at}: Required value: must be specified")
        problems += [f"{at}[{i}].image: Required value" for i, c in enumerate(containers) if not c.get("image")]
        if keys.TFJob.CONTAINER not in [c.get("name") for c in containers]:
            problems.append(f"{at}: Required value: must have at least one container with name {keys.TFJob.CONTAINER}")
        chiefs += kind in ("Chief", "Master")
    if chiefs > 1:
        problems.append("spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role")
    return problems


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
