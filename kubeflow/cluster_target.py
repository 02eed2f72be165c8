"""What a cluster target is to tfxd: one class per service (kubeflow_pipelines.py, vertex.py) answers every
question the verbs ask of a target, so compile, submit, schedule and replay read the target's answer and
never branch on its name (tests/test_house.py keeps it so). kubeflow/targets.py lists them.

A new target (or a second Kubeflow operator's service) is one new module with one class, and a line in
that list; the spec's side of it (its section, bucket and checks) is pipeline/spec/targets.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from tfxd.kubeflow.clients import OnState
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.targets import Schedule
from tfxd.run_summary import EngineRun

# The sub-DAG TFX's compiler nests a pipeline's tasks in when it has an exit handler (tfx/orchestration/kubeflow/
# v2/pipeline_builder.py, utils.TFX_DAG_NAME): the root then runs it and, after it, the exit task.
TFX_DAG = "tfx-dag"


def pipeline_tasks(pipeline_spec: dict[str, Any]) -> dict[str, Any]:
    """The pipeline's own tasks in a compiled PipelineSpec: those of TFX's sub-DAG, else the root's."""
    nested = pipeline_spec.get("components", {}).get(TFX_DAG, {}).get("dag", {}).get("tasks")
    return nested if nested is not None else pipeline_spec.get("root", {}).get("dag", {}).get("tasks", {})


class ScheduleError(RuntimeError):
    """The schedule cannot be found or made as asked; the message says why and what to do."""


class ClusterTarget(ABC):
    """One service that runs compiled pipelines. ``endpoint`` and ``credentials`` aim a call at another
    API endpoint (a fake in the tests) and at credentials other than the default ones; a service that
    takes no credentials ignores them."""

    NAME: ClassVar[str]  # the spec's targets.<NAME> and `--target NAME`
    TITLE: ClassVar[str]  # the service as its users call it
    EXTENSION: ClassVar[str]  # of the compiled file
    COMPILED: ClassVar[str]  # what the compiled file is, as replay names it to a user
    # TFX's compiler option: PipelineSpec schema 2.1.0 (typed parameters), the only one KFP's backend takes
    PIPELINE_SPEC_2_1: ClassVar[bool]
    # replay runs a task as this service would: its launcher runs a container's lifecycle hooks (TFX's
    # preCacheCheck driver), and it runs resolver executors
    RUNS_LIFECYCLE_HOOKS: ClassVar[bool]
    RUNS_RESOLVERS: ClassVar[bool]

    # ---------------------------------------------------------------- compile

    @abstractmethod
    def adapt(self, pipeline_spec: dict[str, Any], loaded: LoadedSpec, root: str, parameters: dict[str, Any]) -> None:
        """What the service needs in the PipelineSpec beyond TFX's compiler; ``root``:
        the pipeline root, ``parameters``: the pipeline's runtime parameters and the spec's values."""

    @abstractmethod
    def render(self, job: dict[str, Any]) -> str:
        """The compiled file's text, from the PipelineJob as TFX's compiler made it."""

    @abstractmethod
    def read_compiled(self, document: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The PipelineSpec and the runtime config (empty where the file has none) of a compiled file as
        ``render`` writes it, parsed; None for a document that is not one (replay asks each target)."""

    @abstractmethod
    def task_folder(self, task: str) -> str:
        """The folder one execution of ``task`` writes its output artifacts in, under its run's folder, as the
        service names it (`<run folder>/<this>/<key>`): replay names its tasks' outputs so."""

    # ---------------------------------------------------------------- one run

    @abstractmethod
    def submit(self, spec: Spec, compiled_path: str, *, wait: bool = False, endpoint: str | None = None,
               credentials: Any = None, on_state: OnState | None = None) -> str:
        """Start one run of the compiled file (with `wait`, follow it to its end); the line that says what
        was submitted and where to see it. Raises clients.RunFailed when a followed run fails."""

    @abstractmethod
    def run_states(self, spec: Spec, *, endpoint: str | None = None, credentials: Any = None) -> dict[str, EngineRun]:
        """The pipeline's runs the service knows, by the id its run folder in the pipeline root is named
        after (`tfxd history` joins them to the runs' records)."""

    # ---------------------------------------------------------------- the schedule (kubeflow/schedules.py)

    @abstractmethod
    def apply_schedule(self, spec: Spec, schedule: Schedule, compiled_path: str, *, endpoint: str | None = None,
                       credentials: Any = None) -> str:
        """Make the service's schedule match; write only what differs. One line that starts with what it
        did (schedules.APPLY_ACTIONS)."""

    @abstractmethod
    def pause_schedule(self, spec: Spec, paused: bool, *, endpoint: str | None = None,
                       credentials: Any = None) -> str:
        """Stop (``paused``) or start again the schedule's runs; ScheduleError when there is none."""

    @abstractmethod
    def delete_schedule(self, spec: Spec, *, endpoint: str | None = None, credentials: Any = None) -> str:
        """Delete the schedule (ScheduleError when there is none); the runs it started are kept."""

    @abstractmethod
    def list_schedules(self, spec: Spec, *, endpoint: str | None = None,
                       credentials: Any = None) -> list[dict[str, Any]]:
        """The spec's schedules on the service (schedules.list_ says what each row holds)."""
