"""The few Kubernetes API calls the Trainer's job launcher (job_launch.py) makes, with the `kubernetes`
client: which operators' jobs the cluster serves (API discovery, open to every authenticated account),
the chosen operator's jobs (create, get, watch, delete) in one namespace, and the replica pods (list,
logs). The RBAC Role that allows exactly these is the operator's (kubeflow/trainjob-rbac.yaml,
kubeflow/tfjob-rbac.yaml).

Credentials: the pod's own service account inside a cluster (KUBERNETES_SERVICE_HOST is set there),
else KUBECONFIG / ~/.kube/config. The namespace: the one asked for, else the pod's own (its service
account's namespace file), else the kubeconfig context's. The replicas' service account: the one asked
for, else the pod's own when the job runs in the pod's namespace.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from tfxd.components.trainer.operator_job import OperatorJob

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# the pipeline step's pod, from the downward API: the KFP backend sets both in every task's main
# container (backend/src/v2/compiler/argocompiler/common.go: commonEnvs)
POD_NAME_ENV, POD_UID_ENV = "KFP_POD_NAME", "KFP_POD_UID"


class KubernetesError(RuntimeError):
    """An API call failed; says what to do for the usual causes (RBAC, no operator)."""


class Kubernetes:
    """The API as the launcher uses it, in ``namespace`` (default: the pod's own, else the context's); the
    job calls are the chosen operator's (``use``)."""

    job: OperatorJob

    def __init__(self, namespace: str | None = None) -> None:
        # start-up: the kubernetes client loads only in the Trainer task that launches a job
        from kubernetes import client, config

        in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        try:
            if in_cluster:
                config.load_incluster_config()
            else:  # the client reads KUBECONFIG when it is imported: read it now
                config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        except config.ConfigException as exc:
            raise KubernetesError(f"no Kubernetes credentials: {exc}. The Trainer that launches an operator's "
                                  "job runs in a Kubeflow pipeline pod (or with KUBECONFIG set)") from None
        self.own_namespace = _pod_namespace() if in_cluster else _context_namespace(config)
        self.namespace = namespace or self.own_namespace or "default"
        self.custom = client.CustomObjectsApi()
        self.core = client.CoreV1Api()

    def use(self, job: OperatorJob) -> Kubernetes:
        """The job calls from now on are ``job``'s operator's."""
        self.job = job
        self._api = (job.GROUP, job.VERSION)
        return self

    def serves(self, job: OperatorJob) -> bool:
        """Whether the cluster serves ``job``'s kind (its group/version lists the resource)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            found = self.custom.api_client.call_api(
                f"/apis/{job.GROUP}/{job.VERSION}", "GET", auth_settings=["BearerToken"], response_type="object",
                _return_http_data_only=True)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise KubernetesError(f"cannot ask the cluster whether it serves {job.PLURAL} ({job.GROUP}/"
                                  f"{job.VERSION}): HTTP {exc.status} {exc.reason}: {_message(exc.body)}") from None
        except (OSError, HTTPError) as exc:
            raise KubernetesError(f"cannot reach the Kubernetes API to ask whether it serves {job.PLURAL}: "
                                  f"{exc}") from None
        return any(resource.get("name") == job.PLURAL for resource in (found or {}).get("resources") or [])

    def own_pod(self) -> dict[str, str] | None:
        """The step's pod, the job's owner: only when known and in the job's namespace (an owner
        reference cannot cross namespaces)."""
        name, uid = os.environ.get(POD_NAME_ENV), os.environ.get(POD_UID_ENV)
        if name and uid and self.namespace == self.own_namespace:
            return {"name": name, "uid": uid}
        return None

    def own_service_account(self) -> str | None:
        """The service account the step's pod runs as (from its token's claims), for replicas in the same
        namespace: they then read and write the bucket with the pipeline's own rights."""
        if self.namespace != self.own_namespace:
            return None
        try:
            with open(os.path.join(SERVICE_ACCOUNT_DIR, "token"), encoding="utf-8") as handle:
                payload = handle.read().split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (OSError, IndexError, ValueError):
            return None
        bound = (claims.get("kubernetes.io") or {}).get("serviceaccount") or {}
        return bound.get("name") or claims.get("kubernetes.io/serviceaccount/service-account.name")

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._do("create", lambda: self.custom.create_namespaced_custom_object(
            *self._api, self.namespace, self.job.PLURAL, body))

    def get(self, name: str) -> dict[str, Any] | None:
        return self._do("get", lambda: self.custom.get_namespaced_custom_object(
            *self._api, self.namespace, self.job.PLURAL, name), missing=None)

    def delete(self, name: str, wait: bool) -> bool:
        """Delete the job and its pods (foreground); ``wait``: until it is gone, so that its name is free.
        False when there was none."""
        from kubernetes import client

        deleted = self._do("delete", lambda: self.custom.delete_namespaced_custom_object(
            *self._api, self.namespace, self.job.PLURAL, name, body=client.V1DeleteOptions(
                propagation_policy="Foreground")), missing=False)
        if deleted is False:
            return False
        deadline = time.monotonic() + 300
        while wait and self.get(name) is not None:
            if time.monotonic() > deadline:
                raise KubernetesError(f"the {self.job.KIND} {self.namespace}/{name} is still being deleted after "
                                      "5 minutes")
            time.sleep(1)
        return True

    def watch(self, name: str, resource_version: str | None, seconds: float) -> Iterator[dict[str, Any]]:
        """The job's events for up to ``seconds``; an expired resource version ends the stream (the caller
        reads the job again)."""
        from kubernetes import watch

        stream = watch.Watch().stream(
            self.custom.list_namespaced_custom_object, *self._api, self.namespace, self.job.PLURAL,
            field_selector=f"metadata.name={name}", resource_version=resource_version,
            timeout_seconds=max(1, int(seconds)))
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield from stream
        except ApiException as exc:
            if exc.status != 410:  # 410 Gone: an expired resource version
                raise KubernetesError(self._explain("watch", exc)) from None
        except (OSError, HTTPError) as exc:
            raise KubernetesError(f"cannot reach the Kubernetes API to watch {self.job.PLURAL}: {exc}") from None

    def pods(self, name: str) -> list[dict[str, Any]]:
        from kubernetes import client

        found = self._do("list the pods of", lambda: self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{self.job.JOB_NAME_LABEL}={name}"))
        return [client.ApiClient().sanitize_for_serialization(pod) for pod in found.items]

    def log(self, pod: str, lines: int) -> str:
        try:
            return self._do("read the log of", lambda: self.core.read_namespaced_pod_log(
                pod, self.namespace, container=self.job.CONTAINER, tail_lines=lines))
        except KubernetesError as exc:
            return f"(its log cannot be read: {exc})"

    def _do(self, verb: str, call, missing: Any = ...) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return call()
        except ApiException as exc:
            if exc.status == 404 and missing is not ...:
                return missing
            raise KubernetesError(self._explain(verb, exc)) from None
        except (OSError, HTTPError) as exc:
            raise KubernetesError(f"cannot reach the Kubernetes API to {verb} {self.job.PLURAL}: {exc}") from None

    def _explain(self, verb: str, exc) -> str:
        job = self.job
        what = f"{verb} {job.PLURAL} in namespace {self.namespace}"
        message = _message(exc.body)
        if exc.status == 403 and "admission webhook" in message:  # the operator's webhook refused the job
            return f"{job.OPERATOR} refused the {job.KIND}: {message}"
        if exc.status == 403:
            return (f"the pipeline's service account may not {what} (HTTP 403): apply {job.RBAC} "
                    "to that namespace (docs/distributed.md, Distributed training on Kubeflow)")
        if exc.status == 404 and verb == "create":
            return (f"this cluster does not know {job.KIND}s ({job.GROUP}/{job.VERSION}): install {job.INSTALL} "
                    "(docs/distributed.md, Distributed training on Kubeflow)")
        return f"cannot {what}: HTTP {exc.status} {exc.reason}: {message}"


def _message(body: Any) -> str:
    try:
        return json.loads(body).get("message", "")
    except (TypeError, ValueError):
        return str(body or "")[:300]


def _pod_namespace() -> str | None:
    try:
        with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace"), encoding="utf-8") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def _context_namespace(config) -> str | None:
    try:
        _, context = config.list_kube_config_contexts(config_file=os.environ.get("KUBECONFIG"))
    except (config.ConfigException, OSError):
        return None
    return (context or {}).get("context", {}).get("namespace")
