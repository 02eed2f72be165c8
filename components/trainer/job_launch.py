"""The Trainer task that launches a Kubeflow training operator's job and follows it to its end, for every
operator alike (operator_job.py: what differs between them).

The pipeline's Trainer task runs OperatorExecutor. It chooses the operator (choose_operator:
targets.kubeflow.trainer.operator, and for `auto` what the cluster serves: a Kubeflow Trainer v2 TrainJob
first, else a Training Operator TFJob) and says which and why. It creates the job through the Kubernetes API
(kubernetes_client.py), each replica running tfxd's Trainer executor in the pipeline image with this task's
inputs (operator_replica.py), so every replica's planner reads the cluster its operator described. It then
follows the job: a line per state change, a replica that cannot start or fails named with its reason and
its last log lines, the job deleted when the step fails, times out or is stopped (SIGTERM), and an owner
reference to the step's pod so that Kubernetes deletes the job with the pod. The job's name is fixed per
run and task: a retried step takes over its own finished job or replaces an unfinished one, and the
replicas resume from the BackupAndRestore checkpoint (the same backup folder for the same training).

The TrainJob of Kubeflow Trainer v2 is trainjob.py, the TFJob of the Training Operator v1 tfjob.py.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from typing import Any

from absl import logging
from tfx.components.trainer.component import Trainer as TfxTrainer
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs

from tfxd import files
from tfxd.components.trainer import executor as trainer_executor
from tfxd.components.trainer import peer_blame
from tfxd.components.trainer.kubernetes_client import Kubernetes, KubernetesError
from tfxd.components.trainer.operator_job import OperatorJob, job_name, replica_args
from tfxd.components.trainer.tfjob import TFJob
from tfxd.components.trainer.trainjob import TrainJob
from tfxd.trainer_config import OperatorSettings

POLL_SECONDS = 5  # how often the replica pods are looked at while the job runs (a pull error shows there)
GRACE_SECONDS = 120  # past the job's own deadline, for the operator to fail it before this step does
# a replica that waits with one of these never starts: fail now rather than at the deadline
STUCK = ("ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError",
         "CreateContainerError")


class TrainingJobFailed(RuntimeError):
    """The job failed, timed out or could not be created; says which replica and why."""


# targets.kubeflow.trainer.operator -> the job; `auto` takes the first the cluster serves, in this order
OPERATORS: dict[str, OperatorJob] = {"trainjob": TrainJob(), "tfjob": TFJob()}


def choose_operator(wanted: str, served: dict[str, bool]) -> tuple[OperatorJob, str]:
    """The operator's job to launch, and why: ``wanted`` is the spec's choice, ``served`` which of OPERATORS
    the cluster serves (API discovery). An operator the cluster lacks fails, naming it and what to install."""
    if wanted != "auto":
        job = OPERATORS[wanted]
        if not served[wanted]:
            raise TrainingJobFailed(
                f"targets.kubeflow.trainer.operator is {wanted}, and this cluster does not serve {job.PLURAL} "
                f"({job.GROUP}/{job.VERSION}): install {job.INSTALL}, or set operator: auto to take the one the "
                "cluster has")
        return job, f"targets.kubeflow.trainer.operator: {wanted}"
    for name, job in OPERATORS.items():
        if served[name]:
            others = [f"{o.PLURAL} ({o.GROUP}/{o.VERSION}) {'served too' if served[n] else 'not served'}"
                      for n, o in OPERATORS.items() if n != name]
            return job, f"auto: the cluster serves {job.PLURAL} ({job.GROUP}/{job.VERSION}); {'; '.join(others)}"
    raise TrainingJobFailed(
        "this cluster serves neither " + " nor ".join(f"{job.PLURAL} ({job.GROUP}/{job.VERSION})"
                                                      for job in OPERATORS.values())
        + f": install {OPERATORS['trainjob'].INSTALL} (or {OPERATORS['tfjob'].INSTALL}); see docs/distributed.md, "
        "Distributed training on Kubeflow")


class _Stopped(BaseException):
    """SIGTERM arrived (the run was cancelled, or the pod is being evicted)."""


class OperatorExecutor(trainer_executor.Executor):
    """The Trainer task that launches an operator's job of replicas and follows it, instead of training
    itself (compiled files name this class)."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        exec_properties, config = self._with_run_facts(input_dict, output_dict, exec_properties)
        settings, backup_dir = config.operator_job, config.backup_dir or ""
        if settings is None:
            raise ValueError("the Trainer's custom_config has no operator job settings: compile the spec again "
                             "with this tfxd")
        replica_properties = {**exec_properties,
                              standard_component_specs.CUSTOM_CONFIG_KEY: config.for_replicas().to_text()}
        model_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY])
        kube = Kubernetes(settings.namespace)
        asked = OPERATORS if settings.operator == "auto" else {settings.operator: OPERATORS[settings.operator]}
        try:
            job, why = choose_operator(settings.operator, {name: kube.serves(job) for name, job in asked.items()})
        except KubernetesError as exc:
            raise TrainingJobFailed(str(exc)) from None
        logging.info("tfxd trainer: launching a %s (%s)", job.KIND, why)
        kube.use(job)
        settings = replace(settings, service_account=settings.service_account or kube.own_service_account())
        name = job_name(settings.pipeline, model_uri)
        body = job.body(name, kube.namespace, settings,
                        replica_args(input_dict, output_dict, replica_properties), kube.own_pod())
        # a retried step meets its first attempt's job and outputs: a succeeded job's model is taken as it is,
        # else the outputs are emptied (a half-saved model) before the new job starts
        Launch(kube, name, settings, backup_dir, lambda: self._model_written(output_dict),
               lambda: files.empty_outputs(output_dict)).run(body)
        self._check_model(output_dict)
        trainer_executor.drop_backup(backup_dir)


class OperatorTrainer(TfxTrainer):
    """tfxd's Trainer, trained by a Kubeflow operator's job (a TrainJob or a TFJob)."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(OperatorExecutor)


class Launch:
    """One operator's job, from creation (or take-over) to its end."""

    def __init__(self, kube: Kubernetes, name: str, settings: OperatorSettings, backup_dir: str, model_written,
                 empty_outputs) -> None:
        self.kube, self.job, self.name, self.settings, self.backup_dir = kube, kube.job, name, settings, backup_dir
        self.model_written, self.empty_outputs = model_written, empty_outputs
        self.where = f"{self.job.KIND} {kube.namespace}/{name}"
        self.said: set[str] = set()

    def run(self, body: dict[str, Any]) -> None:
        previous = signal.signal(signal.SIGTERM, _raise_stopped)
        try:
            if self._take_over():
                return
            self.empty_outputs()
            self._call(self.kube.create, body)
            logging.info("tfxd trainer: created %s (%s)", self.where, self.job.shape(body))
            self._follow(time.monotonic() + self.settings.timeout_seconds + GRACE_SECONDS)
        except _Stopped:
            self._delete("the step was stopped (SIGTERM)")
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)  # end as a stopped process does: exit status 143
            raise
        except TrainingJobFailed:
            self._delete("the training failed")
            raise
        finally:
            if signal.getsignal(signal.SIGTERM) is _raise_stopped:
                signal.signal(signal.SIGTERM, previous)
        logging.info("tfxd trainer: %s succeeded; its replicas' logs: kubectl logs -n %s -l %s=%s", self.where,
                     self.kube.namespace, self.job.JOB_NAME_LABEL, self.name)

    def _take_over(self) -> bool:
        """A retried step meets the job of its earlier attempt: a succeeded one whose model is written is
        taken as it is; any other is deleted, and the new one resumes from the checkpoint."""
        job = self._call(self.kube.get, self.name)
        if job is None:
            return False
        state = self.job.state(job)
        if state == "Succeeded" and self.model_written():
            logging.info("tfxd trainer: %s, of an earlier attempt of this step, succeeded: taking its model",
                         self.where)
            return True
        logging.info("tfxd trainer: replacing %s, left %s by an earlier attempt of this step", self.where,
                     state or "starting")
        self._call(self.kube.delete, self.name, wait=True)
        return False

    def _follow(self, deadline: float) -> None:
        while True:
            job = self._call(self.kube.get, self.name)
            if job is None:
                raise TrainingJobFailed(f"{self.where} was deleted from outside while it trained")
            if self._done(job):
                return
            if time.monotonic() > deadline:
                raise TrainingJobFailed(f"{self.where} did not finish within {self.settings.timeout} "
                                        "(targets.kubeflow.trainer.timeout)")
            self._check_pods()
            version = job["metadata"].get("resourceVersion")
            try:
                for event in self.kube.watch(self.name, version, min(POLL_SECONDS, deadline - time.monotonic())):
                    if event["type"] == "DELETED":
                        raise TrainingJobFailed(f"{self.where} was deleted from outside while it trained")
                    if event["type"] in ("ADDED", "MODIFIED") and self._done(event["object"]):
                        return
            except KubernetesError as exc:
                raise TrainingJobFailed(f"{self.where}: {exc}") from None

    def _done(self, job: dict[str, Any]) -> bool:
        """Says a state change once; True when the job succeeded, raises when it failed."""
        state = self.job.state(job)
        line = f"{state or 'Pending'} ({self.job.progress(job)})"
        if line not in self.said:
            self.said.add(line)
            logging.info("tfxd trainer: %s: %s", self.where, line)
        if state == "Failed":
            condition = _condition(job, "Failed")
            raise TrainingJobFailed(f"{self.where} failed: {self._culprit(job) or condition.get('message', '')}"
                                    f"{self._resume_hint()}")
        return state == "Succeeded"

    def _check_pods(self) -> None:
        for pod in self._call(self.kube.pods, self.name):
            waiting = self._container(pod).get("state", {}).get("waiting") or {}
            if waiting.get("reason") in STUCK:
                raise TrainingJobFailed(f"{self.where}: replica {self.job.replica(pod)} (pod "
                                        f"{pod['metadata']['name']}) cannot start: {waiting['reason']}: "
                                        f"{waiting.get('message', '')}".rstrip(": ") + _STUCK_HINT.get(waiting["reason"], ""))
            for condition in pod.get("status", {}).get("conditions") or []:
                if condition.get("reason") == "Unschedulable":
                    line = f"replica {self.job.replica(pod)} waits for a node: {condition.get('message', '')}"
                    if line not in self.said:
                        self.said.add(line)
                        logging.info("tfxd trainer: %s: %s", self.where, line)

    def _culprit(self, job: dict[str, Any]) -> str | None:
        """The first replica that failed, its reason and exit code, and its last log lines; when its log says
        TensorFlow lost a peer (frozen, hung, cut off: alive, so its own pod shows nothing), that peer first,
        and the failed replica as the one that reported it."""
        pods = self._call(self.kube.pods, self.name)
        for pod in pods:
            terminated = self._container(pod).get("state", {}).get("terminated") or {}
            if (terminated and terminated.get("exitCode", 0) != 0) or pod.get("status", {}).get("phase") == "Failed":
                tail = self._call(self.kube.log, pod["metadata"]["name"], 200)
                text = self._ended(pod) + (f"; its last lines:\n{_last(tail, 20)}\n" if tail.strip() else "")
                lost = peer_blame.lost_peer(tail, self.job.task(pod, job))
                peer = next((p for p in pods if lost is not None and self.job.task(p, job) == lost.replica), None)
                if lost is None or peer is None:
                    return text
                cause = self._ended(peer, running="stopped answering while running (frozen, hung, or cut off from "
                                                  "the others)")
                return (f"{cause}: TensorFlow lost it ({lost.said}); its log: kubectl logs -n {self.kube.namespace} "
                        f"{peer['metadata']['name']}. Reported by {text}")
        return None

    def _ended(self, pod: dict[str, Any], running: str = "") -> str:
        """`replica worker-1 (pod NAME) REASON (exit code N)`, with what the reason means; ``running`` for a
        pod whose container has not ended."""
        terminated = self._container(pod).get("state", {}).get("terminated") or {}
        text = f"replica {self.job.replica(pod)} (pod {pod['metadata']['name']})"
        if not terminated and pod.get("status", {}).get("phase") != "Failed":
            return f"{text} {running}"
        reason = terminated.get("reason") or pod.get("status", {}).get("reason") or "Failed"
        code = terminated.get("exitCode")
        return f"{text} {reason}" + (f" (exit code {code})" if code is not None else "") + _EXIT_HINT.get(reason, "")

    def _resume_hint(self) -> str:
        if fileio.exists(self.backup_dir):
            return f"\nRetry the step to resume from the last epoch checkpointed in {self.backup_dir}"
        return ""

    def _delete(self, why: str) -> None:
        try:
            if self.kube.delete(self.name, wait=False):
                logging.info("tfxd trainer: deleted %s: %s", self.where, why)
        except KubernetesError as exc:
            logging.warning("tfxd trainer: could not delete %s (%s): delete it with kubectl delete %s -n %s %s",
                            self.where, exc, self.job.PLURAL, self.kube.namespace, self.name)

    def _call(self, method, *args, **kwargs):
        try:
            return method(*args, **kwargs)
        except KubernetesError as exc:
            raise TrainingJobFailed(f"{self.where}: {exc}") from None

    def _container(self, pod: dict[str, Any]) -> dict[str, Any]:
        for status in pod.get("status", {}).get("containerStatuses") or []:
            if status.get("name") == self.job.CONTAINER:
                return status
        return {}


_EXIT_HINT = {"OOMKilled": ": out of memory; raise targets.kubeflow.trainer.resources.worker.memory (or ps)",
              "Evicted": ": the node ran short of resources"}
_STUCK_HINT = {"ImagePullBackOff": "; check targets.kubeflow.image and that the cluster can pull it",
               "InvalidImageName": "; check targets.kubeflow.image"}


def _raise_stopped(signum, frame) -> None:
    raise _Stopped()


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any]:
    """The job's status condition of that type ({} if none)."""
    for condition in job.get("status", {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return {}


def _last(text: str, lines: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])
