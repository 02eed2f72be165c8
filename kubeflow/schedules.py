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
paused, resumed, deleted (apply's word is also in APPLY_ACTIONS).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tfxd.kubeflow.submit import (
    KEEP_COMPILED_CACHING,
    cluster_pipeline_root,
    compiled_hash,
    kfp_client,
    kubeflow_host,
    kubeflow_target,
    quiet,
    spec_hash,
    vertex_job,
    vertex_pipeline_root,
    vertex_sdk,
    vertex_target,
)
from tfxd.pipeline.spec import cron
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.targets import Schedule

TARGETS = ("vertex", "kubeflow")
APPLY_ACTIONS = ("created", "unchanged", "updated", "replaced")
_HASHES = re.compile(r"\[tfxd-spec=(?P<spec>[0-9a-f]+) tfxd-compiled=(?P<compiled>[0-9a-f]+)\]")
_PAGE = 100


class ScheduleError(RuntimeError):
    """The schedule cannot be found or made as asked; the message says why and what to do."""


def _schedule(spec: Spec, target: str) -> Schedule:
    _check_target(target)
    schedule = getattr(spec.targets, target).schedule if getattr(spec.targets, target) else None
    if schedule is None:
        raise ScheduleError(f"the spec {spec.name!r} has no targets.{target}.schedule; add e.g. "
                            f"schedule: {{cron: '0 3 * * *', timezone: UTC}}")
    return schedule


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"schedules are for targets {' and '.join(TARGETS)}, not {target!r}")


# ---------------------------------------------------------------------------- public verbs


def apply(spec: Spec, target: str, compiled_path: str, *, credentials: Any = None,
          api_endpoint: str | None = None, host: str | None = None) -> str:
    """Make the target's schedule match the spec and the compiled file; write only what differs."""
    schedule = _schedule(spec, target)
    if target == "vertex":
        return _vertex_apply(spec, schedule, compiled_path, credentials, api_endpoint)
    return _kfp_apply(spec, schedule, compiled_path, host)


def pause(spec: Spec, target: str, *, credentials: Any = None, api_endpoint: str | None = None,
          host: str | None = None) -> str:
    """Stop starting runs (ScheduleError when there is no schedule of that name)."""
    return _set_paused(spec, target, True, credentials, api_endpoint, host)


def resume(spec: Spec, target: str, *, credentials: Any = None, api_endpoint: str | None = None,
           host: str | None = None) -> str:
    """Start runs again; missed runs are not caught up (ScheduleError when there is none)."""
    return _set_paused(spec, target, False, credentials, api_endpoint, host)


def delete(spec: Spec, target: str, *, credentials: Any = None, api_endpoint: str | None = None,
           host: str | None = None) -> str:
    """Delete the schedule (ScheduleError when there is none); runs it started are kept."""
    _check_target(target)
    if target == "vertex":
        found = _vertex_require(spec, credentials, api_endpoint)
        with quiet():
            for schedule in found:
                schedule.delete()
        return f"deleted Vertex AI schedule {spec.name} ({', '.join(s.resource_name for s in found)})"
    client, _, found = _kfp_require(spec, host)
    with quiet():
        for run in found:
            client.delete_recurring_run(run.recurring_run_id)
    return f"deleted Kubeflow recurring run {spec.name} ({', '.join(r.recurring_run_id for r in found)})"


def list_(spec: Spec, target: str, *, credentials: Any = None, api_endpoint: str | None = None,
          host: str | None = None) -> list[dict[str, Any]]:
    """The spec's schedules on the target: name (resource name or recurring run id), display_name,
    cron, state, next_run_time (ISO 8601, None where the service does not say), max_concurrent_runs,
    spec_hash and compiled_hash (what each one runs; None when tfxd did not make it)."""
    _check_target(target)
    if target == "vertex":
        return [_vertex_row(s) for s in _vertex_find(spec, credentials, api_endpoint)]
    _, _, found = _kfp_find(spec, host)
    return [_kfp_row(r) for r in found]


def _set_paused(spec: Spec, target: str, paused: bool, credentials: Any, api_endpoint: str | None,
                host: str | None) -> str:
    _check_target(target)
    verb = "paused" if paused else "resumed"
    if target == "vertex":
        found = _vertex_require(spec, credentials, api_endpoint)
        changed = [s for s in found if (_vertex_state(s) == "PAUSED") != paused]
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
    client, _, found = _kfp_require(spec, host)
    changed = [r for r in found if (_kfp_state(r) == "DISABLED") != paused]
    with quiet():
        for run in changed:
            if paused:
                client.disable_recurring_run(run.recurring_run_id)
            else:
                client.enable_recurring_run(run.recurring_run_id)
    ids = ", ".join(r.recurring_run_id for r in found)
    if not changed:
        return f"unchanged: Kubeflow recurring run {spec.name} is already {verb} ({ids})"
    return f"{verb} Kubeflow recurring run {spec.name} ({ids})"


# ---------------------------------------------------------------------------- Vertex AI


def vertex_cron(schedule: Schedule) -> str:
    """Vertex takes the time zone as a prefix of the cron."""
    return f"TZ={schedule.timezone} {schedule.cron}"


def _vertex_find(spec: Spec, credentials: Any, api_endpoint: str | None) -> list[Any]:
    target = vertex_target(spec)
    aiplatform = vertex_sdk(api_endpoint, credentials)
    with quiet():
        found = aiplatform.PipelineJobSchedule.list(
            filter=f'display_name="{spec.name}"', project=target.project, location=target.region,
            credentials=credentials)
    return [s for s in found if s.gca_resource.display_name == spec.name]


def _vertex_require(spec: Spec, credentials: Any, api_endpoint: str | None) -> list[Any]:
    found = _vertex_find(spec, credentials, api_endpoint)
    if not found:
        target = vertex_target(spec)
        raise ScheduleError(f"no Vertex AI schedule named {spec.name!r} in project {target.project}, "
                            f"region {target.region}; create it with `tfxd schedule apply`")
    return found


def _vertex_state(schedule: Any) -> str:
    return getattr(schedule.gca_resource.state, "name", str(schedule.gca_resource.state))


def _vertex_frozen(schedule: Any) -> tuple[str, str, str]:
    """What a Vertex schedule cannot change: the compiled pipeline, the run-as account, the root."""
    job = schedule.gca_resource.create_pipeline_job_request.pipeline_job
    return (job.labels.get("tfxd-compiled", ""), job.service_account, job.runtime_config.gcs_output_directory)


def _vertex_options(schedule: Any) -> tuple[str, int]:
    return schedule.gca_resource.cron, int(schedule.gca_resource.max_concurrent_run_count)


def _vertex_apply(spec: Spec, schedule: Schedule, compiled_path: str, credentials: Any,
                  api_endpoint: str | None) -> str:
    target = vertex_target(spec)
    cron = vertex_cron(schedule)
    options = (cron, schedule.max_concurrent_runs)
    frozen = (compiled_hash(compiled_path), target.service_account or "", vertex_pipeline_root(spec, compiled_path))
    what = f"{cron}, at most {schedule.max_concurrent_runs} concurrent run(s)"
    found = _vertex_find(spec, credentials, api_endpoint)
    keep = next((s for s in found if _vertex_frozen(s) == frozen), None)

    if keep is None:
        paused = any(_vertex_state(s) == "PAUSED" for s in found)
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
        if _vertex_options(keep) != options:
            keep.update(cron=cron, max_concurrent_run_count=schedule.max_concurrent_runs)
            return f"updated Vertex AI schedule {spec.name} ({keep.resource_name}) in place: {what}"
    if stale:
        return (f"updated Vertex AI schedule {spec.name} ({keep.resource_name}): removed "
                f"{len(stale)} duplicate(s); {what}")
    return f"unchanged: Vertex AI schedule {spec.name} ({keep.resource_name}): {what}"


def _vertex_row(schedule: Any) -> dict[str, Any]:
    resource = schedule.gca_resource
    labels = resource.create_pipeline_job_request.pipeline_job.labels
    next_run = resource.next_run_time
    return {"name": resource.name, "display_name": resource.display_name, "cron": resource.cron,
            "state": _vertex_state(schedule), "next_run_time": next_run.isoformat() if next_run else None,
            "max_concurrent_runs": int(resource.max_concurrent_run_count),
            "spec_hash": labels.get("tfxd-spec"), "compiled_hash": labels.get("tfxd-compiled")}


# ---------------------------------------------------------------------------- Kubeflow Pipelines


def kfp_cron(schedule: Schedule) -> str:
    """KFP's cron (robfig/cron) has a seconds field first and days of the week 0-6: '0 ' + the spec's
    five fields, a Sunday written 7 written 0. KFP has no time zone, so only UTC is taken."""
    if schedule.timezone not in cron.KFP_TIMEZONES:
        raise ScheduleError(f"Kubeflow Pipelines schedules have no time zone (they follow the cluster's "
                            f"clock, normally UTC), so {schedule.timezone!r} cannot be honoured; set "
                            f"targets.kubeflow.schedule.timezone: UTC and shift the cron's hours")
    *fields, weekday = schedule.cron.split()
    items = []
    for item in weekday.split(","):
        if item == "7":
            item = "0"
        elif (match := re.fullmatch(r"([0-6])-7", item)) is not None:
            item = f"{match.group(1)}-6,0"
        items.append(item)
    return " ".join(["0", *fields, ",".join(items)])


def _kfp_description(spec: Spec, compiled_path: str) -> str:
    text = spec.description or f"tfxd pipeline {spec.name}"
    return f"{text} [tfxd-spec={spec_hash(spec)} tfxd-compiled={compiled_hash(compiled_path)}]"


def _kfp_hashes(run: Any) -> dict[str, str | None]:
    match = _HASHES.search(run.description or "")
    return {"spec": match["spec"] if match else None, "compiled": match["compiled"] if match else None}


def _kfp_cron_of(run: Any) -> str | None:
    trigger = run.trigger
    return trigger.cron_schedule.cron if trigger is not None and trigger.cron_schedule is not None else None


def _kfp_state(run: Any) -> str:
    return str(run.status or "")


def _kfp_find(spec: Spec, host: str | None) -> tuple[Any, str | None, list[Any]]:
    """The client, the experiment's id (None when it does not exist) and the recurring runs in it."""
    kubeflow_target(spec)
    client = kfp_client(kubeflow_host(spec, host))
    with quiet():
        try:
            experiment_id = client.get_experiment(experiment_name=spec.name).experiment_id
        except ValueError:  # kfp: "No experiment is found with name ..."
            return client, None, []
        name_filter = json.dumps({"predicates": [
            {"operation": "EQUALS", "key": "display_name", "stringValue": spec.name}]})
        found: list[Any] = []
        token = ""
        while True:
            page = client.list_recurring_runs(page_token=token, page_size=_PAGE, experiment_id=experiment_id,
                                              filter=name_filter)
            found += [r for r in page.recurring_runs or [] if r.display_name == spec.name]
            token = page.next_page_token
            if not token:
                break
    return client, experiment_id, found


def _kfp_require(spec: Spec, host: str | None) -> tuple[Any, str | None, list[Any]]:
    client, experiment_id, found = _kfp_find(spec, host)
    if not found:
        raise ScheduleError(f"no Kubeflow recurring run named {spec.name!r} in experiment {spec.name!r} on "
                            f"{kubeflow_host(spec, host) or 'the in-cluster KFP'}; create it with "
                            f"`tfxd schedule apply`")
    return client, experiment_id, found


def _kfp_apply(spec: Spec, schedule: Schedule, compiled_path: str, host: str | None) -> str:
    cron = kfp_cron(schedule)
    wanted_hash = compiled_hash(compiled_path)
    what = f"{cron} (UTC), at most {schedule.max_concurrent_runs} concurrent run(s)"
    client, experiment_id, found = _kfp_find(spec, host)

    root = cluster_pipeline_root(spec, "kubeflow")

    def same(run: Any) -> tuple[bool, bool]:
        run_root = run.runtime_config.pipeline_root if run.runtime_config is not None else None
        pipeline = _kfp_hashes(run)["compiled"] == wanted_hash and (run_root or None) == root
        options = (_kfp_cron_of(run) == cron
                   and int(run.max_concurrency or 0) == schedule.max_concurrent_runs)
        return pipeline, options

    if len(found) == 1 and all(same(found[0])):
        return f"unchanged: Kubeflow recurring run {spec.name} ({found[0].recurring_run_id}): {what}"

    paused = any(_kfp_state(r) == "DISABLED" for r in found)
    with quiet():
        if experiment_id is None:
            experiment_id = client.create_experiment(name=spec.name).experiment_id
        created = client.create_recurring_run(
            experiment_id=experiment_id, job_name=spec.name, description=_kfp_description(spec, compiled_path),
            cron_expression=cron, max_concurrency=schedule.max_concurrent_runs, no_catchup=True,
            pipeline_package_path=compiled_path, pipeline_root=root, enabled=not paused, enable_caching=KEEP_COMPILED_CACHING)
        for old in found:  # only once the new one exists
            client.delete_recurring_run(old.recurring_run_id)
    if not found:
        return f"created Kubeflow recurring run {spec.name} ({created.recurring_run_id}): {what}"
    why = ("the compiled pipeline or its root changed" if not all(same(r)[0] for r in found)
           else "KFP cannot change a recurring run's schedule in place" if len(found) == 1
           else "there were duplicates")
    note = ", kept paused" if paused else ""
    return (f"replaced Kubeflow recurring run {spec.name} ({created.recurring_run_id}, was "
            f"{', '.join(r.recurring_run_id for r in found)}; {why}{note}): {what}")


def _kfp_row(run: Any) -> dict[str, Any]:
    hashes = _kfp_hashes(run)
    return {"name": run.recurring_run_id, "display_name": run.display_name, "cron": _kfp_cron_of(run),
            "state": _kfp_state(run), "next_run_time": None,
            "max_concurrent_runs": int(run.max_concurrency) if run.max_concurrency else None,
            "spec_hash": hashes["spec"], "compiled_hash": hashes["compiled"]}
