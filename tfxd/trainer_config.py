"""The Trainer's custom_config: what run_fn trains by and what launches it. pipeline/assembly writes the spec's
part (the Trainer's sections of the spec, the local cluster, the label-only columns) and the launcher's
(a Kubeflow operator job's settings, or TFX's Vertex training keys); the Trainer executor adds the run's facts
(the train split's size, BackupAndRestore's folder, the spans read); run_fn, an operator job's launcher and
its replicas read it, on other machines than the one that compiled it. One type, one writer (`to_json`,
the dict TFX serializes), one reader (`from_json`, or `of` the exec properties); the keys are
keys.TrainerConfig's, each written only where it says something, so compiled files are unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tfxd import keys

CONFIG = keys.TrainerConfig


@dataclass(frozen=True)
class ProcessCluster:
    """targets.local.trainer: the Trainer as this many local processes, on ``network`` (loopback, or hosts
    of their own: components/trainer/replica_hosts.py)."""

    workers: int = 1
    parameter_servers: int = 0
    network: str = "loopback"

    @property
    def distributed(self) -> bool:
        return self.workers > 1 or self.parameter_servers > 0


@dataclass(frozen=True)
class OperatorSettings:
    """targets.kubeflow.trainer as the operator job's launcher reads it (components/trainer/job_launch.py),
    with what the assembly adds: the pipeline's name and image, and the timeout in seconds."""

    pipeline: str
    image: str
    operator: str  # auto, tfjob or trainjob: the spec's choice (pipeline/spec/targets.py), job_launch.OPERATORS' names
    runtime: str  # the ClusterTrainingRuntime a TrainJob references
    workers: int
    parameter_servers: int
    resources: dict[str, dict[str, Any]]  # {"worker": {cpu, memory, gpu}, "ps": {...}}, Kubernetes quantities
    clean_pod_policy: str
    timeout: str  # as the spec says it, e.g. "6h"
    timeout_seconds: int
    namespace: str | None = None  # None: the pipeline pod's own
    service_account: str | None = None  # None: the pipeline pod's own
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OperatorSettings:
        return cls(**data)


@dataclass(frozen=True)
class TrainerCustomConfig:
    spec: dict[str, Any]  # the resolved spec's Trainer sections, as JSON (pipeline/assembly/configs.py)
    local_cluster: ProcessCluster | None = None  # None on a cluster target
    label_only: tuple[str, ...] = ()  # columns only the label reads: a serving request has none of them
    operator_job: OperatorSettings | None = None  # the Kubeflow operator job that runs the replicas
    # what a launcher outside tfxd reads, verbatim (TFX's cloud training executor's keys, for Vertex)
    launcher: dict[str, Any] = field(default_factory=dict)
    train_examples: int | None = None  # the train split's size, for `training.epochs`
    backup_dir: str | None = None  # BackupAndRestore's folder, the same for a retry of the same training
    spans: list[Any] | None = None  # the spans the examples came from, recorded beside the model

    def with_run_facts(self, train_examples: int | None, spans: list[Any] | None,
                       backup_dir: str) -> TrainerCustomConfig:
        return replace(self, train_examples=train_examples if train_examples is not None else self.train_examples,
                       spans=spans if spans is not None else self.spans, backup_dir=backup_dir)

    def for_replicas(self) -> TrainerCustomConfig:
        """What the launched replicas train by: without the job's settings (they launch nothing)."""
        return replace(self, operator_job=None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            CONFIG.SPEC: self.spec, CONFIG.LOCAL_CLUSTER: asdict(self.local_cluster) if self.local_cluster else None,
            CONFIG.LABEL_ONLY: list(self.label_only),
            **({CONFIG.OPERATOR_JOB: self.operator_job.to_json()} if self.operator_job else {}), **self.launcher}
        for key, value in ((CONFIG.TRAIN_EXAMPLES, self.train_examples), (CONFIG.BACKUP_DIR, self.backup_dir),
                           (CONFIG.SPANS, self.spans)):
            if value is not None:
                data[key] = value
        return data

    def to_text(self) -> str:
        """As the exec property holds it."""
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainerCustomConfig:
        cluster = data.get(CONFIG.LOCAL_CLUSTER)
        own = {CONFIG.SPEC, CONFIG.LOCAL_CLUSTER, CONFIG.LABEL_ONLY, CONFIG.TRAIN_EXAMPLES, CONFIG.BACKUP_DIR,
               CONFIG.SPANS, CONFIG.OPERATOR_JOB}
        return cls(
            spec=data[CONFIG.SPEC], local_cluster=ProcessCluster(**cluster) if cluster else None,
            label_only=tuple(data.get(CONFIG.LABEL_ONLY) or ()),
            operator_job=OperatorSettings.from_json(data[CONFIG.OPERATOR_JOB]) if data.get(CONFIG.OPERATOR_JOB) else None,
            launcher={key: value for key, value in data.items() if key not in own},
            train_examples=data.get(CONFIG.TRAIN_EXAMPLES), backup_dir=data.get(CONFIG.BACKUP_DIR),
            spans=data.get(CONFIG.SPANS))


def of(exec_properties: dict[str, Any]) -> TrainerCustomConfig:
    """The custom_config among a Trainer's exec properties (TFX keeps it as JSON text there)."""
    from tfx.types import standard_component_specs  # start-up: the ground loads TFX only when asked

    return TrainerCustomConfig.from_json(json.loads(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY]))

