"""`tfxd schedule apply|pause|resume|delete|list`: recurring retraining on Vertex AI or Kubeflow Pipelines.

A schedule is found by name: the spec's `name` is the Vertex schedule's display name and the KFP
recurring run's name (in the experiment of that name). `apply` is idempotent, so it can run from CI
on every commit:

- nothing there: create it;
- the same compiled pipeline and the same cron, time zone and concurrency: send no write at all;
- the same compiled pipeline, other cron or concurrency: update in place on Vertex; KFP cannot change a
  recurring run, so there it is replaced;
- another compiled pipeline: replace it (create the new one, then delete the old one), because both
  services freeze the pipeline inside the schedule. A paused schedule stays paused when replaced.

What a schedule runs is recognised by the hash of the compiled file (`tfxd-compiled`, next to
`tfxd-spec`, the hash of the resolved spec when it was applied): on Vertex both are labels of the
PipelineJob inside the schedule's create_pipeline_job_request, on KFP they are written at the end of
the recurring run's description as `[tfxd-spec=... tfxd-compiled=...]`. The pipeline root (and on
Vertex the run-as service account) is frozen too, and a change to it also replaces.

Every function returns one line that starts with what it did: created, unchanged, updated, replaced,
paused, resumed, deleted (apply's word is also in APPLY_ACTIONS). Each target does it with its service's
SDK (kubeflow/vertex.py, kubeflow/kubeflow_pipelines.py); ``endpoint`` and ``credentials`` aim the calls
at another endpoint and credentials (the spec's host, then KF_PIPELINES_ENDPOINT, for Kubeflow).
"""

from __future__ import annotations

from typing import Any

from tfxd.kubeflow.cluster_target import ClusterTarget, ScheduleError
from tfxd.kubeflow.targets import cluster_target
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.targets import Schedule

APPLY_ACTIONS = ("created", "unchanged", "updated", "replaced")
__all__ = ["APPLY_ACTIONS", "ScheduleError", "apply", "delete", "list_", "pause", "resume"]


def _schedule(spec: Spec, target: ClusterTarget) -> Schedule:
    section = getattr(spec.targets, target.NAME)  # a cluster target's section, which has a schedule
    schedule = section.schedule if section is not None else None
    if schedule is None:
        raise ScheduleError(f"the spec {spec.name!r} has no targets.{target.NAME}.schedule; add e.g. "
                            f"schedule: {{cron: '0 3 * * *', timezone: UTC}}")
    return schedule


def apply(spec: Spec, target: str, compiled_path: str, *, endpoint: str | None = None,
          credentials: Any = None) -> str:
    """Make the target's schedule match the spec and the compiled file; write only what differs."""
    service = cluster_target(target)
    return service.apply_schedule(spec, _schedule(spec, service), compiled_path, endpoint=endpoint,
                                  credentials=credentials)


def pause(spec: Spec, target: str, *, endpoint: str | None = None, credentials: Any = None) -> str:
    """Stop starting runs (ScheduleError when there is no schedule of that name)."""
    return cluster_target(target).pause_schedule(spec, True, endpoint=endpoint, credentials=credentials)


def resume(spec: Spec, target: str, *, endpoint: str | None = None, credentials: Any = None) -> str:
    """Start runs again; missed runs are not caught up (ScheduleError when there is none)."""
    return cluster_target(target).pause_schedule(spec, False, endpoint=endpoint, credentials=credentials)


def delete(spec: Spec, target: str, *, endpoint: str | None = None, credentials: Any = None) -> str:
    """Delete the schedule (ScheduleError when there is none); runs it started are kept."""
    return cluster_target(target).delete_schedule(spec, endpoint=endpoint, credentials=credentials)


def list_(spec: Spec, target: str, *, endpoint: str | None = None, credentials: Any = None) -> list[dict[str, Any]]:
    """The spec's schedules on the target: name (resource name or recurring run id), display_name,
    cron, state, next_run_time (ISO 8601, None where the service does not say), max_concurrent_runs,
    spec_hash and compiled_hash (what each one runs; None when tfxd did not make it)."""
    return cluster_target(target).list_schedules(spec, endpoint=endpoint, credentials=credentials)
