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
    cpu: float | Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?m?$")] | None = Field(
        None, description="cores, e.g. 4 or '500m'")
    memory: str | None = Field(None, pattern=QUANTITY, description="e.g. 16Gi")
    gpu: int | None = Field(None, ge=0)


# A pipeline name the open-source KFP API server takes (backend/src/apiserver/template/v2_template.go:
# "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
KFP_PIPELINE_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class KubeflowTarget(Section):
    image: str = Field(min_length=1, description="the pipeline image, built from kubeflow/Dockerfile")
    host: str | None = Field(None, pattern=r"^https?://", description="the KFP API endpoint")
    root: str | None = Field(None, pattern=r"^[a-z][a-z0-9+.-]*://.+", description="the pipeline root on the "
                             "cluster, e.g. gs://bucket/pipelines (default: the spec's root when it is a URI)")
    resources: dict[Component, Resources] = Field(default_factory=dict)
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

