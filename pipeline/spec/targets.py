"""Where it runs: `targets` (local, kubeflow, vertex) and their schedules. The other sections never
name a target; a target never changes what the pipeline computes.

Each target's model also carries what the spec's floors ask of a target (does it run on a cluster, the
bucket its pipeline root and pushes go to, what it cannot honour, which launcher its Trainer needs), so
placement, validation and assembly read a target's facts and never branch on its name; kubeflow/'s
target modules do the same for compile, submit, schedule and replay.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from tfxd import keys
from tfxd.files import is_uri
from tfxd.pipeline.spec import cron
from tfxd.pipeline.spec.base import QUANTITY, Component, PositiveInt, Section
from tfxd.pipeline.spec.errors import Problems

ACCELERATORS = (
    "NVIDIA_TESLA_K80", "NVIDIA_TESLA_P4", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100", "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_L4", "NVIDIA_H100_80GB", "NVIDIA_H100_MEGA_80GB",
    "NVIDIA_H200_141GB", "NVIDIA_B200", "TPU_V2", "TPU_V3", "TPU_V4_POD", "TPU_V5_LITEPOD",
)


class TrainerCluster(Section):
    workers: PositiveInt = 1
    parameter_servers: int = Field(0, ge=0)


class TargetSection(Section):
    """What every target answers. ON_CLUSTER: the pipeline runs from the image, on a cluster's bucket;
    NEEDS: the keys a spec must give for this target (said when the section is missing)."""

    ON_CLUSTER: ClassVar[bool] = True
    NEEDS: ClassVar[str] = ""

    def bucket(self, spec_root: str | None) -> str | None:
        """The folder under which the pipeline's root and pushes go (None: the target has none)."""
        return None

    def trainer_launcher(self) -> str | None:
        """The launcher that runs the Trainer's replicas outside its own task (pipeline/assembly/dag.py
        maps it to a Trainer class), or None when the Trainer trains in its task."""
        return None

    def check(self, name: str, problems: Problems) -> None:
        """What this target cannot honour in the spec, refused rather than dropped."""


class LocalTrainer(TrainerCluster):
    """The Trainer as local processes when it asks for more than one."""

    network: Literal["loopback", "hosts"] = Field(
        "loopback", description="loopback: every replica on this machine's localhost, each at a port of its "
        "own; hosts: each replica on a host of its own (a Linux network namespace on a bridge of the "
        "cluster's replicas; needs root and iproute2), at port 2222 under its replica name, as the pods of "
        "a TFJob: the TF_CONFIG a cluster writes runs verbatim, and a replica's link can be cut or slowed")

    @property
    def distributed(self) -> bool:
        return self.workers > 1 or self.parameter_servers > 0


class LocalTarget(TargetSection):
    ON_CLUSTER: ClassVar[bool] = False

    orchestrator: Literal["local", "beam"] = Field(
        "local", description="local: LocalDagRunner, one node at a time; beam: BeamDagRunner, independent "
        "branches side by side")
    trainer: LocalTrainer = Field(default_factory=LocalTrainer)


class Schedule(Section):
    cron: str = Field(description="five fields: minute hour day-of-month month day-of-week")
    timezone: str = Field("UTC", description="an IANA time zone, e.g. Europe/Berlin")
    max_concurrent_runs: PositiveInt = 1

    @model_validator(mode="after")
    def _check(self) -> Schedule:
        problems = Problems()
        if message := cron.cron_problem(self.cron):
            problems.add(("cron",), message, "e.g. '0 3 * * 1' runs at 03:00 every Monday")
        if message := cron.timezone_problem(self.timezone):
            problems.add(("timezone",), message, "use an IANA name such as UTC or Europe/Berlin")
        problems.raise_if_any()
        return self


class Resources(Section):
    cpu: Annotated[float, Field(gt=0)] | Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?m?$")] | None = Field(
        None, description="cores, e.g. 4 or '500m'")
    memory: str | None = Field(None, pattern=QUANTITY, description="e.g. 16Gi")
    gpu: int | None = Field(None, ge=0)


# A pipeline name the open-source KFP API server takes (backend/src/apiserver/template/v2_template.go:
# "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
KFP_PIPELINE_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


# Kubernetes names: a DNS-1123 label (namespaces), a DNS-1123 subdomain (service accounts), label keys
# and values (node selectors, tolerations), as the API server checks them (k8s.io/apimachinery validation)
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
LABEL_KEY = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
DURATION = r"^[1-9][0-9]*(s|m|h|d)$"
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """'90m' -> 5400."""
    return int(text[:-1]) * SECONDS[text[-1]]


class Toleration(Section):
    """A Kubernetes toleration, so that replicas can land on tainted (GPU) nodes."""

    key: Annotated[str, Field(pattern=LABEL_KEY)] | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Annotated[str, Field(pattern=LABEL_VALUE)] | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    @model_validator(mode="after")
    def _check(self) -> Toleration:
        # the API server's rules (k8s.io/kubernetes pkg/apis/core/validation: validateTolerations)
        problems = Problems()
        if self.operator == "Exists" and self.value:
            problems.add(("value",), "a toleration with operator Exists matches any value, and takes none",
                         "drop value, or use operator Equal")
        if self.key is None and self.operator != "Exists":
            problems.add(("key",), "a toleration without a key must use operator Exists (it then tolerates "
                         "every taint)", "give the taint's key, e.g. nvidia.com/gpu")
        problems.raise_if_any()
        return self


class ReplicaResources(Section):
    worker: Resources = Field(default_factory=Resources, description="each chief and worker (under "
                              "ParameterServer the chief only coordinates, and gets no GPU)")
    ps: Resources = Field(default_factory=Resources, description="each parameter server")


class KubeflowTrainer(TrainerCluster):
    """The Trainer as an operator's job when it asks for more than one process: a Kubeflow Trainer v2
    TrainJob, or a TFJob of the Training Operator v1; `workers` and `parameter_servers` mean what they
    mean for targets.vertex.trainer."""

    operator: Literal["auto", "tfjob", "trainjob"] = Field(
        "auto", description="who runs the replicas: auto asks the cluster at run time and takes a TrainJob "
        "(Kubeflow Trainer v2) where it is served, else a TFJob (Training Operator v1)")
    runtime: Annotated[str, Field(pattern=DNS_SUBDOMAIN, max_length=253)] = Field(
        keys.TrainJob.RUNTIME, description="the ClusterTrainingRuntime a TrainJob references (tfxd's, "
        "installed with `tfxd kubeflow-manifest trainjob-runtime | kubectl apply -f -`)")
    resources: ReplicaResources = Field(default_factory=ReplicaResources)
    namespace: Annotated[str, Field(pattern=DNS_LABEL)] | None = Field(
        None, description="where the job runs (default: the pipeline pod's own namespace)")
    service_account: Annotated[str, Field(pattern=DNS_SUBDOMAIN, max_length=253)] | None = Field(
        None, description="the replicas' service account (default: the pipeline pod's own, when the job runs "
        "in its namespace)")
    node_selector: dict[Annotated[str, Field(pattern=LABEL_KEY)], Annotated[str, Field(pattern=LABEL_VALUE)]] = (
        Field(default_factory=dict, description="e.g. {cloud.google.com/gke-accelerator: nvidia-tesla-t4}"))
    tolerations: list[Toleration] = Field(default_factory=list)
    clean_pod_policy: Literal["Running", "All", "None"] = Field(
        "Running", description="which replica pods the Training Operator deletes when a TFJob ends (a "
        "TrainJob's end stops its nodes)")
    timeout: str = Field("24h", pattern=DURATION, description="the longest the job may run, e.g. 90m, 6h")

    @property
    def needs_operator_job(self) -> bool:
        """One process trains inside the pipeline's Trainer pod itself."""
        return self.workers > 1 or self.parameter_servers > 0


class KubeflowTarget(TargetSection):
    NEEDS: ClassVar[str] = "image"

    image: str = Field(min_length=1, description="the pipeline image, built from kubeflow/Dockerfile")
    host: str | None = Field(None, pattern=r"^https?://", description="the KFP API endpoint")
    root: str | None = Field(None, pattern=r"^[a-z][a-z0-9+.-]*://.+", description="the pipeline root on the "
                             "cluster, e.g. gs://bucket/pipelines (default: the spec's root when it is a URI)")
    resources: dict[Component, Resources] = Field(default_factory=dict)
    trainer: KubeflowTrainer = Field(default_factory=KubeflowTrainer)
    schedule: Schedule | None = None

    def bucket(self, spec_root: str | None) -> str | None:
        return self.root or (spec_root if spec_root and is_uri(spec_root) else None)

    def trainer_launcher(self) -> str | None:
        return keys.OPERATOR_JOB_LAUNCHER if self.trainer.needs_operator_job else None

    def check(self, name: str, problems: Problems) -> None:
        if not re.match(KFP_PIPELINE_NAME, name):
            problems.add(("name",), f"Kubeflow Pipelines takes a pipeline name that starts and ends with a letter "
                         f"or digit, and {name!r} does not", "drop the trailing '-' from name")
        self._check_trainer(problems)
        if self.schedule and self.schedule.timezone not in cron.KFP_TIMEZONES:
            problems.add(("targets", "kubeflow", "schedule", "timezone"), "Kubeflow recurring runs have no time "
                         "zone: their cron is read in the cluster's time (UTC)",
                         "use timezone: UTC and write the cron in UTC")
        requests: list[tuple[tuple[str, ...], Resources]] = [(("resources", component), resources)
                                                             for component, resources in self.resources.items()]
        if self.trainer.needs_operator_job:
            requests += [(("trainer", "resources", kind), getattr(self.trainer.resources, kind))
                         for kind in ("worker", "ps")]
        for at, resources in requests:
            if resources.memory and resources.memory.endswith("m"):
                problems.add(("targets", "kubeflow", *at, "memory"), f"memory {resources.memory!r} is in "
                             "thousandths of a byte", "use Mi or Gi, e.g. 512Mi")

    def _check_trainer(self, problems: Problems) -> None:
        """An operator job that cannot work, or keys that configure a job which does not run."""
        trainer, at = self.trainer, ("targets", "kubeflow", "trainer")
        if not trainer.needs_operator_job:
            job_keys = sorted(trainer.model_fields_set - {"workers", "parameter_servers"})
            if job_keys:
                problems.add((*at, job_keys[0]), f"{', '.join(job_keys)} configure(s) the operator's job (a "
                             "TrainJob or a TFJob), which runs only when the Trainer has more than one worker "
                             "or parameter servers",
                             "for one Trainer pod use targets.kubeflow.resources.Trainer, or set workers: 2 or more")
            return
        self._check_operator(problems)
        if trainer.resources.ps.gpu:
            problems.add((*at, "resources", "ps", "gpu"), "parameter servers hold variables and compute nothing: "
                         "a GPU there is never used", "put GPUs under resources.worker")
        if trainer.parameter_servers and trainer.clean_pod_policy == "None":
            problems.add((*at, "clean_pod_policy"), "parameter servers (and, under ParameterServer, the workers) "
                         "serve until they are stopped: with clean_pod_policy None they keep running, and "
                         "holding their nodes, after the training ends", "use Running (the default) or All")
        launcher = self.resources.get("Trainer")
        if launcher is not None and launcher.gpu:
            problems.add(("targets", "kubeflow", "resources", "Trainer", "gpu"), "with an operator's job the "
                         "Trainer task only launches and follows it: a GPU there is never used",
                         "put GPUs under targets.kubeflow.trainer.resources.worker")

    def _check_operator(self, problems: Problems) -> None:
        """Keys that one operator's job has and the other's cannot honour."""
        trainer, at = self.trainer, ("targets", "kubeflow", "trainer")
        if trainer.operator == "tfjob" and "runtime" in trainer.model_fields_set:
            problems.add((*at, "runtime"), "runtime names the ClusterTrainingRuntime of a TrainJob, and "
                         "operator: tfjob launches a TFJob", "drop runtime, or use operator: auto or trainjob")
        if trainer.operator != "trainjob":
            return
        if "clean_pod_policy" in trainer.model_fields_set:
            problems.add((*at, "clean_pod_policy"), "clean_pod_policy is the Training Operator's (a TFJob's); "
                         "a TrainJob stops its nodes when node 0 (the chief) ends",
                         "drop clean_pod_policy, or use operator: tfjob")
        if trainer.parameter_servers and trainer.resources.ps.model_fields_set:
            problems.add((*at, "resources", "ps"), "Kubeflow Trainer sizes every node of a TrainJob alike "
                         "(resourcesPerNode): parameter servers get resources.worker, and resources.ps cannot "
                         "apply", "drop resources.ps, or use operator: tfjob to size them apart")


class Accelerator(Section):
    type: Literal[ACCELERATORS]  # type: ignore[valid-type]
    count: PositiveInt = 1


class VertexTrainer(Section):
    workers: PositiveInt = 1
    parameter_servers: int = Field(0, ge=0)
    machine_type: str = Field("n1-standard-4", min_length=1)
    accelerator: Accelerator | None = None

    @property
    def needs_custom_job(self) -> bool:
        """One process without accelerators trains inside the pipeline task itself."""
        return self.workers > 1 or self.parameter_servers > 0 or self.accelerator is not None


class VertexTarget(TargetSection):
    NEEDS: ClassVar[str] = "project, region, image and root"

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", description="the Google Cloud project id")
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]$", description="e.g. us-central1")
    image: str = Field(min_length=1, description="the pipeline image, built from kubeflow/Dockerfile")
    root: str = Field(pattern=r"^gs://[a-z0-9][a-z0-9._-]{1,220}(/.*)?$", description="gs://bucket/path")
    service_account: str | None = Field(None, pattern=r"^[^@\s]+@[^@\s]+\.iam\.gserviceaccount\.com$")
    trainer: VertexTrainer = Field(default_factory=VertexTrainer)
    schedule: Schedule | None = None

    def bucket(self, spec_root: str | None) -> str | None:
        return self.root

    def trainer_launcher(self) -> str | None:
        return keys.VERTEX_JOB_LAUNCHER if self.trainer.needs_custom_job else None


class Targets(Section):
    local: LocalTarget = Field(default_factory=LocalTarget)
    kubeflow: KubeflowTarget | None = None
    vertex: VertexTarget | None = None

    def section(self, name: str) -> TargetSection | None:
        """targets.<name>, a name of TARGETS (None: the spec has no such section)."""
        found: TargetSection | None = getattr(self, name)
        return found


# The targets and each one's model (its facts hold also where the spec has no section for it): the one
# table of target names below kubeflow/ (tests/test_house.py refuses a branch on a name elsewhere).
TARGET_MODELS: dict[str, type[TargetSection]] = {"local": LocalTarget, "kubeflow": KubeflowTarget,
                                                 "vertex": VertexTarget}
TARGETS = tuple(TARGET_MODELS)
CLUSTER_TARGETS = tuple(name for name, model in TARGET_MODELS.items() if model.ON_CLUSTER)
