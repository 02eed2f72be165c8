"""Where it runs: `targets` (local, kubeflow, vertex) and their schedules. The other sections never
name a target; a target never changes what the pipeline computes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

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


class LocalTarget(Section):
    orchestrator: Literal["local", "beam"] = Field(
        "local", description="local: LocalDagRunner, one node at a time; beam: BeamDagRunner, independent "
        "branches side by side")
    trainer: TrainerCluster = Field(default_factory=TrainerCluster)


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
    """The Trainer as a TFJob (Kubeflow Training Operator) when it asks for more than one process;
    `workers` and `parameter_servers` mean what they mean for targets.vertex.trainer."""

    resources: ReplicaResources = Field(default_factory=ReplicaResources)
    namespace: Annotated[str, Field(pattern=DNS_LABEL)] | None = Field(
        None, description="where the TFJob runs (default: the pipeline pod's own namespace)")
    service_account: Annotated[str, Field(pattern=DNS_SUBDOMAIN, max_length=253)] | None = Field(
        None, description="the replicas' service account (default: the pipeline pod's own, when the job runs "
        "in its namespace)")
    node_selector: dict[Annotated[str, Field(pattern=LABEL_KEY)], Annotated[str, Field(pattern=LABEL_VALUE)]] = (
        Field(default_factory=dict, description="e.g. {cloud.google.com/gke-accelerator: nvidia-tesla-t4}"))
    tolerations: list[Toleration] = Field(default_factory=list)
    clean_pod_policy: Literal["Running", "All", "None"] = Field(
        "Running", description="which replica pods the operator deletes when the job ends")
    timeout: str = Field("24h", pattern=DURATION, description="the longest the TFJob may run, e.g. 90m, 6h")

    @property
    def needs_tfjob(self) -> bool:
        """One process trains inside the pipeline's Trainer pod itself."""
        return self.workers > 1 or self.parameter_servers > 0


class KubeflowTarget(Section):
    image: str = Field(min_length=1, description="the pipeline image, built from kubeflow/Dockerfile")
    host: str | None = Field(None, pattern=r"^https?://", description="the KFP API endpoint")
    root: str | None = Field(None, pattern=r"^[a-z][a-z0-9+.-]*://.+", description="the pipeline root on the "
                             "cluster, e.g. gs://bucket/pipelines (default: the spec's root when it is a URI)")
    resources: dict[Component, Resources] = Field(default_factory=dict)
    trainer: KubeflowTrainer = Field(default_factory=KubeflowTrainer)
    schedule: Schedule | None = None


class Accelerator(Section):
    type: Literal[ACCELERATORS]  # type: ignore[valid-type]
    count: PositiveInt = 1


class VertexTrainer(Section):
    workers: PositiveInt = 1
    parameter_servers: int = Field(0, ge=0)
    machine_type: str = Field("n1-standard-4", min_length=1)
    accelerator: Accelerator | None = None


class VertexTarget(Section):
    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", description="the Google Cloud project id")
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]$", description="e.g. us-central1")
    image: str = Field(min_length=1, description="the pipeline image, built from kubeflow/Dockerfile")
    root: str = Field(pattern=r"^gs://[a-z0-9][a-z0-9._-]{1,220}(/.*)?$", description="gs://bucket/path")
    service_account: str | None = Field(None, pattern=r"^[^@\s]+@[^@\s]+\.iam\.gserviceaccount\.com$")
    trainer: VertexTrainer = Field(default_factory=VertexTrainer)
    schedule: Schedule | None = None


class Targets(Section):
    local: LocalTarget = Field(default_factory=LocalTarget)
    kubeflow: KubeflowTarget | None = None
    vertex: VertexTarget | None = None


TARGETS = tuple(Targets.model_fields)

