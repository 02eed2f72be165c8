"""What a Kubeflow training operator's job is to tfxd's Trainer, whichever operator serves it: its names, the
job's body, and its state read back (OperatorJob); and how the launching task hands its inputs to each
replica (replica_args, read back by tfjob_replica.py). job_launch.py launches and follows any such job;
the TFJob of the Training Operator v1 is tfjob.py, and another operator is one more OperatorJob.
"""

from __future__ import annotations

import base64
import json
import zlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from tfx.types import artifact_utils

from tfxd.trainer_config import OperatorSettings


class OperatorJob(ABC):
    """One training operator's job, as the launcher and the Kubernetes client need it."""

    KIND: ClassVar[str]  # the custom resource's kind, e.g. TFJob
    GROUP: ClassVar[str]
    VERSION: ClassVar[str]
    PLURAL: ClassVar[str]
    CONTAINER: ClassVar[str]  # the replicas' container that trains (and whose log tells why one failed)
    JOB_NAME_LABEL: ClassVar[str]  # the label the operator puts on each replica pod, with the job's name
    OPERATOR: ClassVar[str]  # who serves the kind, as its users call it ("the Training Operator")
    INSTALL: ClassVar[str]  # what a cluster without the kind installs
    RBAC: ClassVar[str]  # the Role the pipeline's service account needs, under kubeflow/
    SETTINGS_KEY: ClassVar[str]  # where the Trainer's custom_config holds the job's settings (keys.TrainerConfig)

    @abstractmethod
    def body(self, name: str, namespace: str, settings: OperatorSettings, args: list[str],
             owner: dict[str, str] | None) -> dict[str, Any]:
        """The job to create; ``args``: each replica's (replica_args), ``owner``: the step's pod."""

    @abstractmethod
    def job_name(self, pipeline: str, model_uri: str) -> str:
        """Deterministic per run and task, so a retried step finds its own job."""

    @abstractmethod
    def shape(self, body: dict[str, Any]) -> str:
        """The replicas a body asks for, in words (`2 Worker, 1 PS`)."""

    @abstractmethod
    def state(self, job: dict[str, Any]) -> str | None:
        """Pending (None), or the job's state; Succeeded and Failed are final."""

    @abstractmethod
    def progress(self, job: dict[str, Any]) -> str:
        """The replicas' counts as the operator reports them, in words."""

    @abstractmethod
    def replica(self, pod: dict[str, Any]) -> str:
        """Which replica a pod is (`Worker-1`)."""


def encode(value: Any) -> str:
    return base64.b64encode(zlib.compress(json.dumps(value, sort_keys=True).encode())).decode()


def decode(text: str) -> Any:
    return json.loads(zlib.decompress(base64.b64decode(text)))


def replica_args(input_dict, output_dict, exec_properties) -> list[str]:
    """The replicas' arguments: this task's inputs, outputs and properties (without the job's settings, so
    a replica trains instead of launching), as TFX's own cloud trainer passes them to its replicas."""
    return [encode({"inputs": artifact_utils.jsonify_artifact_dict(input_dict),
                    "outputs": artifact_utils.jsonify_artifact_dict(output_dict),
                    "exec_properties": exec_properties})]
