"""Vertex AI Pipelines as a target: the compiled PipelineJob (JSON), one run (`tfxd submit`), the schedule
(`tfxd schedule`; kubeflow/schedules.py says what `apply` does), all through google-cloud-aiplatform.

Runs and schedules carry labels with the hashes of the resolved spec and of the compiled file
(`tfxd-spec`, `tfxd-compiled`), so a run found in the console can be traced back to the spec that made
it, and `apply` recognises what a schedule runs. A schedule freezes the compiled pipeline, the run-as
service account and the pipeline root; a change to any of them replaces it, other changes update it.
"""

from __future__ import annotations

import json
import random
from typing import Any, ClassVar

from tfxd.kubeflow.clients import (
    KEEP_COMPILED_CACHING,
    OnState,
    RunFailed,
    cluster_pipeline_root,
    compiled_hash,
    compiled_job,
    follow,
    quiet,
    report,
    spec_hash,
    vertex_sdk,
)
from tfxd.kubeflow.cluster_target import ClusterTarget, ScheduleError
from tfxd.pipeline.spec import cron
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.targets import Schedule, VertexTarget
from tfxd.run_summary import EngineRun

NAME = "vertex"
# Vertex's PipelineState names without their PIPELINE_STATE_ prefix; the SDK counts PAUSED as done too.
VERTEX_DONE = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "PAUSED"})
VERTEX_FAILED = frozenset({"FAILED", "CANCELLED"})
LABEL_MAX = 63  # Google Cloud label values: at most 63 characters


class VertexPipelines(ClusterTarget):
    NAME: ClassVar[str] = NAME
    TITLE: ClassVar[str] = "Vertex AI Pipelines"
    EXTENSION: ClassVar[str] = ".json"
    COMPILED: ClassVar[str] = "a Vertex PipelineJob (pipelineSpec, runtimeConfig)"
    PIPELINE_SPEC_2_1: ClassVar[bool] = False
    RUNS_LIFECYCLE_HOOKS: ClassVar[bool] = True
    RUNS_RESOLVERS: ClassVar[bool] = True

    def task_folder(self, task: str) -> str:
        """`<task>_<task id>`: Vertex writes a task's outputs under `<root>/<project number>/<job id>/<task name>_
        <its task id>/<key>` (the task id a 64-bit number)."""
        return f"{task}_{random.randrange(10**18, 2**63)}"

    def adapt(self, pipeline_spec: dict[str, Any], loaded: LoadedSpec, root: str, parameters: dict[str, Any]) -> None:
        """Nothing: Vertex runs what TFX's compiler writes, resolvers and the ExampleGen driver included, and
        takes the root and the parameters' values from the PipelineJob's runtime config."""

    def render(self, job: dict[str, Any]) -> str:
        return json.dumps(job, indent=2, sort_keys=True) + "\n"

    def read_compiled(self, document: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        if isinstance(document, dict) and isinstance(document.get("pipelineSpec"), dict):
            return document["pipelineSpec"], document.get("runtimeConfig") or {}
        return None

    def submit(self, spec: Spec, compiled_path: str, *, wait: bool = False, endpoint: str | None = None,
               credentials: Any = None, on_state: OnState | None = None) -> str:
        result = submit_vertex(spec, compiled_path, wait=wait, credentials=credentials, api_endpoint=endpoint,
                               on_state=on_state)
        return f"submitted {result['name']} ({result['state']}): {result['console_url']}"

    def run_states(self, spec: Spec, *, endpoint: str | None = None, credentials: Any = None) -> dict[str, EngineRun]:
        return vertex_runs(spec, credentials=credentials, api_endpoint=endpoint)

    def apply_schedule(self, spec: Spec, schedule: Schedule, compiled_path: str, *, endpoint: str | None = None,
                       credentials: Any = None) -> str:
        return _apply(spec, schedule, compiled_path, credentials, endpoint)

    def pause_schedule(self, spec: Spec, paused: bool, *, endpoint: str | None = None,
                       credentials: Any = None) -> str:
        verb = "paused" if paused else "resumed"
        found = _require(spec, credentials, endpoint)
        changed = [s for s in found if (_state(s) == "PAUSED") != paused]
        with quiet():
            for schedule in changed:
                if paused:
                    schedule.pause()
                else:
                    schedule.resume(catch_up=False)
        names = ", ".join(s.resource_name for s in found)
        if not changed:
            return f"unchanged: Vertex AI schedule {spec.name} is already {verb} ({names})"
        return f"{verb} Vertex AI schedule {spec.name} ({names})"

    def delete_schedule(self, spec: Spec, *, endpoint: str | None = None, credentials: Any = None) -> str:
        found = _require(spec, credentials, endpoint)
        with quiet():
            for schedule in found:
                schedule.delete()
        return f"deleted Vertex AI schedule {spec.name} ({', '.join(s.resource_name for s in found)})"

    def list_schedules(self, spec: Spec, *, endpoint: str | None = None,
                       credentials: Any = None) -> list[dict[str, Any]]:
        return [_row(s) for s in _find(spec, credentials, endpoint)]


# ------------------------------------------------------------------ the spec's target and the job


def vertex_target(spec: Spec) -> VertexTarget:
    if spec.targets.vertex is None:
        raise ValueError(f"the spec {spec.name!r} has no targets.vertex section")
    return spec.targets.vertex


def labels(spec: Spec, compiled_path: str) -> dict[str, str]:
    """The labels tfxd puts on Vertex runs and schedules: the spec, the compiled file, the pipeline."""
    return {"tfxd-spec": spec_hash(spec), "tfxd-compiled": compiled_hash(compiled_path),
            "tfxd-pipeline": spec.name[:LABEL_MAX]}


def _file_labels(path: str) -> dict[str, str]:
    """The compiled PipelineJob's own labels (PipelineJob(labels=...) would otherwise drop them)."""
    found = compiled_job(path).get("labels")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def vertex_pipeline_root(spec: Spec, compiled_path: str) -> str:
    """The compiled job's own root (its runtimeConfig.gcsOutputDirectory) wins: the compiler placed the
    pipeline's files relative to it. A file without one gets the same rule the compiler applies."""
    job = compiled_job(compiled_path)
    found = (job.get("runtimeConfig") or {}).get("gcsOutputDirectory") or \
        (job.get("pipelineSpec") or {}).get("defaultPipelineRoot")
    return str(found or cluster_pipeline_root(spec, NAME) or vertex_target(spec).root)


def vertex_state(state: Any) -> str:
    """PipelineState enum -> 'RUNNING' (its name without the PIPELINE_STATE_ prefix)."""
    return getattr(state, "name", str(state)).removeprefix("PIPELINE_STATE_")


def vertex_console_url(target: VertexTarget, resource_name: str) -> str:
    job_id = resource_name.rsplit("/", 1)[-1]
    return (f"https://console.cloud.google.com/vertex-ai/locations/{target.region}/pipelines/runs/"
            f"{job_id}?project={target.project}")


def vertex_job(spec: Spec, compiled_path: str, *, credentials: Any = None,
               api_endpoint: str | None = None) -> Any:
    """The PipelineJob tfxd submits or schedules: each task cached as the compiled file says, labelled with
    the spec's hashes."""
    target = vertex_target(spec)
    aiplatform = vertex_sdk(api_endpoint, credentials)
    with quiet():
        return aiplatform.PipelineJob(
            display_name=spec.name, template_path=compiled_path,
            pipeline_root=vertex_pipeline_root(spec, compiled_path),
            project=target.project, location=target.region,
            labels={**_file_labels(compiled_path), **labels(spec, compiled_path)},
            enable_caching=KEEP_COMPILED_CACHING, credentials=credentials)


def submit_vertex(spec: Spec, compiled_path: str, *, wait: bool = False, credentials: Any = None,
                  api_endpoint: str | None = None, on_state: OnState | None = None,
                  poll_interval: float = 10.0, timeout: float | None = None) -> dict[str, Any]:
    """Create one PipelineJob from the compiled file; with `wait`, follow it until it ends.

    Returns {"name", "state", "console_url", "url"}; raises RunFailed when it ends FAILED or CANCELLED.
    """
    target = vertex_target(spec)
    job = vertex_job(spec, compiled_path, credentials=credentials, api_endpoint=api_endpoint)
    with quiet():
        job.submit(service_account=target.service_account)
    name = job.resource_name
    url = vertex_console_url(target, name)
    state = vertex_state(job.gca_resource.state)
    if wait:
        def fetch() -> str:
            with quiet():
                return vertex_state(job.state)  # `state` GETs the job

        state = follow(state, fetch, VERTEX_DONE, on_state=on_state, poll_interval=poll_interval,
                       timeout=timeout)
        if state in VERTEX_FAILED:
            message = job.gca_resource.error.message or "no error message"
            raise RunFailed(f"Vertex AI pipeline job {name} ended {state}: {message}\n  see {url}",
                            state=state, name=name, url=url)
    else:
        report(state, on_state)
    return {"name": name, "state": state, "console_url": url, "url": url}


def vertex_runs(spec: Spec, *, credentials: Any = None, api_endpoint: str | None = None) -> dict[str, EngineRun]:
    """The pipeline jobs labelled with the pipeline (tfxd labels every run it submits or schedules), by job
    id: Vertex writes a job's outputs under `<pipeline root>/<project number>/<job id>`."""
    target = vertex_target(spec)
    aiplatform = vertex_sdk(api_endpoint, credentials)
    with quiet():
        jobs = aiplatform.PipelineJob.list(filter=f'labels.tfxd-pipeline="{spec.name[:LABEL_MAX]}"',
                                           project=target.project, location=target.region, credentials=credentials)
    found = {}
    for job in jobs:
        resource = job.gca_resource
        created = resource.create_time
        found[job.resource_name.rsplit("/", 1)[-1]] = EngineRun(
            state=vertex_state(resource.state), name=resource.display_name,
            created=created.isoformat() if hasattr(created, "isoformat") else str(created or ""))
    return found


# ------------------------------------------------------------------ the schedule


def vertex_cron(schedule: Schedule) -> str:
    """Vertex takes the time zone as a prefix of the cron. Sunday is written 0, never 7: Vertex documents
    its cron by Wikipedia's page, where 7 is Sunday only "on some systems", and robfig/cron v3, whose
    TZ=/CRON_TZ= prefixes Vertex's cron takes, refuses it."""
    return f"TZ={schedule.timezone} {cron.with_sunday_as_zero(schedule.cron)}"


def _find(spec: Spec, credentials: Any, api_endpoint: str | None) -> list[Any]:
    target = vertex_target(spec)
    aiplatform = vertex_sdk(api_endpoint, credentials)
    with quiet():
        found = aiplatform.PipelineJobSchedule.list(
            filter=f'display_name="{spec.name}"', project=target.project, location=target.region,
            credentials=credentials)
    return [s for s in found if s.gca_resource.display_name == spec.name]


def _require(spec: Spec, credentials: Any, api_endpoint: str | None) -> list[Any]:
    found = _find(spec, credentials, api_endpoint)
    if not found:
        target = vertex_target(spec)
        raise ScheduleError(f"no Vertex AI schedule named {spec.name!r} in project {target.project}, "
                            f"region {target.region}; create it with `tfxd schedule apply`")
    return found


def _state(schedule: Any) -> str:
    return getattr(schedule.gca_resource.state, "name", str(schedule.gca_resource.state))


def _frozen(schedule: Any) -> tuple[str, str, str]:
    """What a Vertex schedule cannot change: the compiled pipeline, the run-as account, the root."""
    job = schedule.gca_resource.create_pipeline_job_request.pipeline_job
    return (job.labels.get("tfxd-compiled", ""), job.service_account, job.runtime_config.gcs_output_directory)


def _options(schedule: Any) -> tuple[str, int]:
    return schedule.gca_resource.cron, int(schedule.gca_resource.max_concurrent_run_count)


def _apply(spec: Spec, schedule: Schedule, compiled_path: str, credentials: Any,
                  api_endpoint: str | None) -> str:
    target = vertex_target(spec)
    cron = vertex_cron(schedule)
    options = (cron, schedule.max_concurrent_runs)
    frozen = (compiled_hash(compiled_path), target.service_account or "", vertex_pipeline_root(spec, compiled_path))
    what = f"{cron}, at most {schedule.max_concurrent_runs} concurrent run(s)"
    found = _find(spec, credentials, api_endpoint)
    keep = next((s for s in found if _frozen(s) == frozen), None)

    if keep is None:
        paused = any(_state(s) == "PAUSED" for s in found)
        aiplatform = vertex_sdk(api_endpoint, credentials)
        job = vertex_job(spec, compiled_path, credentials=credentials, api_endpoint=api_endpoint)
        with quiet():
            created = aiplatform.PipelineJobSchedule(
                pipeline_job=job, display_name=spec.name, credentials=credentials,
                project=target.project, location=target.region)
            created.create(cron=cron, max_concurrent_run_count=schedule.max_concurrent_runs,
                           service_account=target.service_account)
            if paused:
                created.pause()
            for old in found:  # only once the new one exists
                old.delete()
        if not found:
            return f"created Vertex AI schedule {spec.name} ({created.resource_name}): {what}"
        note = ", kept paused" if paused else ""
        return (f"replaced Vertex AI schedule {spec.name} ({created.resource_name}, was "
                f"{', '.join(s.resource_name for s in found)}; the compiled pipeline changed{note}): {what}")

    stale = [s for s in found if s is not keep]  # duplicates, e.g. from an interrupted replace
    with quiet():
        for old in stale:
            old.delete()
        if _options(keep) != options:
            keep.update(cron=cron, max_concurrent_run_count=schedule.max_concurrent_runs)
            return f"updated Vertex AI schedule {spec.name} ({keep.resource_name}) in place: {what}"
    if stale:
        return (f"updated Vertex AI schedule {spec.name} ({keep.resource_name}): removed "
                f"{len(stale)} duplicate(s); {what}")
    return f"unchanged: Vertex AI schedule {spec.name} ({keep.resource_name}): {what}"


def _row(schedule: Any) -> dict[str, Any]:
    resource = schedule.gca_resource
    labels = resource.create_pipeline_job_request.pipeline_job.labels
    next_run = resource.next_run_time
    return {"name": resource.name, "display_name": resource.display_name, "cron": resource.cron,
            "state": _state(schedule), "next_run_time": next_run.isoformat() if next_run else None,
            "max_concurrent_runs": int(resource.max_concurrent_run_count),
            "spec_hash": labels.get("tfxd-spec"), "compiled_hash": labels.get("tfxd-compiled")}
