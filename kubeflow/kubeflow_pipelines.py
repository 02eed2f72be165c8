"""Kubeflow Pipelines (the open-source 2.x backend) as a target: the compiled PipelineSpec (YAML), one run
(`tfxd submit`), the schedule as a recurring run (`tfxd schedule`; kubeflow/schedules.py says what `apply`
does), all through the kfp SDK.

The file is what the backend accepts and runs (kubeflow/pipelines: backend/src/apiserver/template/
v2_template.go takes schema 2.1.0 only; backend/src/v2/compiler runs container and importer executors
only, and no lifecycle hooks): schema 2.1.0 with typed parameters and their defaults (a KFP package
carries no runtime config), `defaultPipelineRoot` from the target's bucket, ExampleGen without TFX's
pre-cache-check driver (its executor works out the span and fingerprint itself) and never cached: the
backend's cache key holds the task's parameters, not the data, so a cached ExampleGen would hand on old
data. Per-component `resources` become the tasks' resource requests and limits.

A recurring run is recognised by the hashes written at the end of its description as
`[tfxd-spec=... tfxd-compiled=...]`; KFP cannot change a recurring run, so any change replaces it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import uuid
from typing import Any, ClassVar

import yaml

from tfxd.kubeflow.clients import (
    KEEP_COMPILED_CACHING,
    OnState,
    RunFailed,
    cluster_pipeline_root,
    compiled_hash,
    follow,
    kfp_client,
    quiet,
    report,
    spec_hash,
)
from tfxd.kubeflow.cluster_target import ClusterTarget, ScheduleError, pipeline_tasks
from tfxd.pipeline.spec import cron
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.targets import KubeflowTarget, Schedule
from tfxd.run_summary import EngineRun

NAME = "kubeflow"
# KFP v2beta1 RuntimeState.
KFP_DONE = frozenset({"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"})
KFP_FAILED = frozenset({"FAILED", "CANCELED"})
_HASHES = re.compile(r"\[tfxd-spec=(?P<spec>[0-9a-f]+) tfxd-compiled=(?P<compiled>[0-9a-f]+)\]")
_PAGE = 100
_GI = 2**30 / 10**9  # KFP takes memory in GB (10^9 bytes)
_MEMORY_UNITS = {"": 1e-9, "k": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3, "P": 1e6,
                 "Ki": 2**10 / 1e9, "Mi": 2**20 / 1e9, "Gi": _GI, "Ti": 2**40 / 1e9, "Pi": 2**50 / 1e9}
GPU_RESOURCE = "nvidia.com/gpu"


class KubeflowPipelines(ClusterTarget):
    NAME: ClassVar[str] = NAME
    TITLE: ClassVar[str] = "Kubeflow Pipelines"
    EXTENSION: ClassVar[str] = ".yaml"
    COMPILED: ClassVar[str] = "a KFP PipelineSpec (root, deploymentSpec)"
    PIPELINE_SPEC_2_1: ClassVar[bool] = True
    RUNS_LIFECYCLE_HOOKS: ClassVar[bool] = False
    RUNS_RESOLVERS: ClassVar[bool] = False

    def task_folder(self, task: str) -> str:
        """`<task>/<uuid>`: KFP 2.17's driver provisions every output under `<pipeline root>/<pipeline>/<run id>/
        <task>/<a new UUID>/<key>` (backend/src/v2/driver/driver.go, provisionOutputs; container.go passes
        uuid.NewString())."""
        return f"{task}/{uuid.uuid4()}"

    def adapt(self, pipeline_spec: dict[str, Any], loaded: LoadedSpec, root: str, parameters: dict[str, Any]) -> None:
        pipeline_spec["defaultPipelineRoot"] = root
        _set_defaults(pipeline_spec, parameters)
        _set_resources(pipeline_spec, kubeflow_target(loaded.spec).resources)
        executors = pipeline_spec["deploymentSpec"]["executors"]
        for task in pipeline_tasks(pipeline_spec).values():
            executor = executors[pipeline_spec["components"][task["componentRef"]["name"]]["executorLabel"]]
            if executor.get("container", {}).pop("lifecycle", None) is not None:  # ExampleGen's driver
                task["cachingOptions"] = {"enableCache": False}

    def render(self, job: dict[str, Any]) -> str:
        return yaml.safe_dump(job["pipelineSpec"], sort_keys=True)

    def read_compiled(self, document: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        if isinstance(document, dict) and "root" in document and "deploymentSpec" in document:
            return document, {}
        return None

    def submit(self, spec: Spec, compiled_path: str, *, wait: bool = False, endpoint: str | None = None,
               credentials: Any = None, on_state: OnState | None = None) -> str:
        result = submit_kubeflow(spec, compiled_path, wait=wait, host=endpoint, on_state=on_state)
        return f"submitted run {result['run_id']} ({result['state']})" + (f": {result['url']}" if result["url"] else "")

    def run_states(self, spec: Spec, *, endpoint: str | None = None, credentials: Any = None) -> dict[str, EngineRun]:
        return kfp_runs(spec, endpoint)

    def apply_schedule(self, spec: Spec, schedule: Schedule, compiled_path: str, *, endpoint: str | None = None,
                       credentials: Any = None) -> str:
        return _apply(spec, schedule, compiled_path, endpoint)

    def pause_schedule(self, spec: Spec, paused: bool, *, endpoint: str | None = None,
                       credentials: Any = None) -> str:
        verb = "paused" if paused else "resumed"
        client, _, found = _require(spec, endpoint)
        changed = [r for r in found if (_state(r) == "DISABLED") != paused]
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

    def delete_schedule(self, spec: Spec, *, endpoint: str | None = None, credentials: Any = None) -> str:
        client, _, found = _require(spec, endpoint)
        with quiet():
            for run in found:
                client.delete_recurring_run(run.recurring_run_id)
        return f"deleted Kubeflow recurring run {spec.name} ({', '.join(r.recurring_run_id for r in found)})"

    def list_schedules(self, spec: Spec, *, endpoint: str | None = None,
                       credentials: Any = None) -> list[dict[str, Any]]:
        _, _, found = _find(spec, endpoint)
        return [_row(r) for r in found]


# ------------------------------------------------------------------ the compiled file


def _set_defaults(pipeline_spec: dict[str, Any], values: dict[str, Any]) -> None:
    """A KFP package carries no runtime config: the parameters' defaults go into the root's inputs, so
    a run or a recurring run that sets none still works."""
    parameters = pipeline_spec["root"].get("inputDefinitions", {}).get("parameters", {})
    for name, value in values.items():
        parameters[name]["defaultValue"] = value
        parameters[name]["isOptional"] = True


def _set_resources(pipeline_spec: dict[str, Any], resources: dict[str, Any]) -> None:
    executors = pipeline_spec["deploymentSpec"]["executors"]
    for component, wanted in resources.items():
        container = executors[f"{component}_executor"]["container"]
        spec: dict[str, Any] = {}
        if wanted.cpu is not None:
            cores = float(str(wanted.cpu).rstrip("m")) / (1000 if str(wanted.cpu).endswith("m") else 1)
            spec["cpuLimit"] = spec["cpuRequest"] = cores
        if wanted.memory is not None:
            spec["memoryLimit"] = spec["memoryRequest"] = round(memory_gb(wanted.memory), 6)
        if wanted.gpu:
            spec["accelerator"] = {"type": GPU_RESOURCE, "count": str(wanted.gpu)}
        container["resources"] = spec


def memory_gb(quantity: str) -> float:
    """A Kubernetes quantity ('16Gi', '512M', '1e9' is not one) in GB, as KFP takes it."""
    digits = quantity.rstrip("kMGTPi")
    return float(digits) * _MEMORY_UNITS[quantity[len(digits):]]


# ------------------------------------------------------------------ one run


def kubeflow_target(spec: Spec) -> KubeflowTarget:
    if spec.targets.kubeflow is None:
        raise ValueError(f"the spec {spec.name!r} has no targets.kubeflow section")
    return spec.targets.kubeflow


def kubeflow_host(spec: Spec, host: str | None = None) -> str | None:
    """The KFP API endpoint: the argument, else the spec's, else KF_PIPELINES_ENDPOINT (kfp's own)."""
    found = host or kubeflow_target(spec).host or os.environ.get("KF_PIPELINES_ENDPOINT")
    return found.rstrip("/") if found else None


def submit_kubeflow(spec: Spec, compiled_path: str, *, wait: bool = False, host: str | None = None,
                    on_state: OnState | None = None, poll_interval: float = 10.0,
                    timeout: float | None = None) -> dict[str, Any]:
    """Create one run from the compiled package in the experiment named after the pipeline (a KFP
    package carries no pipeline root: the run gets the one `tfxd compile` would use, when the spec
    names a bucket); with `wait`, follow it until it ends.

    Returns {"run_id", "run_name", "experiment_id", "state", "url"}; raises RunFailed when it ends
    FAILED or CANCELED.
    """
    host = kubeflow_host(spec, host)
    client = kfp_client(host)
    run_name = f"{spec.name} {datetime.datetime.now():%Y-%m-%d %H-%M-%S}"
    with quiet():
        result = client.create_run_from_pipeline_package(
            compiled_path, arguments={}, run_name=run_name, experiment_name=spec.name,
            pipeline_root=cluster_pipeline_root(spec, NAME), enable_caching=KEEP_COMPILED_CACHING)
    run_id = result.run_id
    url = f"{host}/#/runs/details/{run_id}" if host else None
    state = result.run_info.state or ""
    if wait:
        last: list[Any] = [result.run_info]

        def fetch() -> str:
            last[0] = client.get_run(run_id)
            return last[0].state or ""

        state = follow(state, fetch, KFP_DONE, on_state=on_state, poll_interval=poll_interval, timeout=timeout)
        if state in KFP_FAILED:
            error = last[0].error
            message = (error.message if error is not None else None) or "no error message"
            raise RunFailed(f"Kubeflow run {run_id} ended {state}: {message}" + (f"\n  see {url}" if url else ""),
                            state=state, name=run_id, url=url)
    else:
        report(state, on_state)
    return {"run_id": run_id, "run_name": run_name, "experiment_id": result.run_info.experiment_id,
            "state": state, "url": url}


def kfp_runs(spec: Spec, host: str | None = None) -> dict[str, EngineRun]:
    """The runs in the experiment named after the pipeline (where tfxd submit and schedule put them), by run
    id: KFP writes a run's outputs under `<pipeline root>/<pipeline>/<run id>`."""
    client = kfp_client(kubeflow_host(spec, host))
    runs: list[Any] = []
    with quiet():
        try:
            experiment = client.get_experiment(experiment_name=spec.name)
        except ValueError:  # no experiment of that name: nothing was submitted yet
            return {}
        token = ""
        while True:
            page = client.list_runs(experiment_id=experiment.experiment_id, page_token=token, page_size=100)
            runs += page.runs or []
            token = page.next_page_token or ""
            if not token:
                break
    return {run.run_id: EngineRun(state=run.state or "", created=_iso(run.created_at), name=run.display_name or "")
            for run in runs}


def _iso(moment: Any) -> str:
    return moment.isoformat() if isinstance(moment, datetime.datetime) else str(moment or "")


# ------------------------------------------------------------------ the schedule


def kfp_cron(schedule: Schedule) -> str:
    """KFP's cron (robfig/cron) has a seconds field first and days of the week 0-6: '0 ' + the spec's
    five fields, Sunday written 0 (cron.with_sunday_as_zero). KFP has no time zone, so only UTC is taken."""
    if schedule.timezone not in cron.KFP_TIMEZONES:
        raise ScheduleError(f"Kubeflow Pipelines schedules have no time zone (they follow the cluster's "
                            f"clock, normally UTC), so {schedule.timezone!r} cannot be honoured; set "
                            f"targets.kubeflow.schedule.timezone: UTC and shift the cron's hours")
    return f"0 {cron.with_sunday_as_zero(schedule.cron)}"


def _description(spec: Spec, compiled_path: str) -> str:
    text = spec.description or f"tfxd pipeline {spec.name}"
    return f"{text} [tfxd-spec={spec_hash(spec)} tfxd-compiled={compiled_hash(compiled_path)}]"


def _hashes(run: Any) -> dict[str, str | None]:
    match = _HASHES.search(run.description or "")
    return {"spec": match["spec"] if match else None, "compiled": match["compiled"] if match else None}


def _cron_of(run: Any) -> str | None:
    trigger = run.trigger
    return trigger.cron_schedule.cron if trigger is not None and trigger.cron_schedule is not None else None


def _state(run: Any) -> str:
    return str(run.status or "")


def _find(spec: Spec, host: str | None) -> tuple[Any, str | None, list[Any]]:
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


def _require(spec: Spec, host: str | None) -> tuple[Any, str | None, list[Any]]:
    client, experiment_id, found = _find(spec, host)
    if not found:
        raise ScheduleError(f"no Kubeflow recurring run named {spec.name!r} in experiment {spec.name!r} on "
                            f"{kubeflow_host(spec, host) or 'the in-cluster KFP'}; create it with "
                            f"`tfxd schedule apply`")
    return client, experiment_id, found


def _apply(spec: Spec, schedule: Schedule, compiled_path: str, host: str | None) -> str:
    cron = kfp_cron(schedule)
    wanted_hash = compiled_hash(compiled_path)
    what = f"{cron} (UTC), at most {schedule.max_concurrent_runs} concurrent run(s)"
    client, experiment_id, found = _find(spec, host)

    root = cluster_pipeline_root(spec, NAME)

    def same(run: Any) -> tuple[bool, bool]:
        run_root = run.runtime_config.pipeline_root if run.runtime_config is not None else None
        pipeline = _hashes(run)["compiled"] == wanted_hash and (run_root or None) == root
        options = (_cron_of(run) == cron
                   and int(run.max_concurrency or 0) == schedule.max_concurrent_runs)
        return pipeline, options

    if len(found) == 1 and all(same(found[0])):
        return f"unchanged: Kubeflow recurring run {spec.name} ({found[0].recurring_run_id}): {what}"

    paused = any(_state(r) == "DISABLED" for r in found)
    with quiet():
        if experiment_id is None:
            experiment_id = client.create_experiment(name=spec.name).experiment_id
        created = client.create_recurring_run(
            experiment_id=experiment_id, job_name=spec.name, description=_description(spec, compiled_path),
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


def _row(run: Any) -> dict[str, Any]:
    hashes = _hashes(run)
    return {"name": run.recurring_run_id, "display_name": run.display_name, "cron": _cron_of(run),
            "state": _state(run), "next_run_time": None,
            "max_concurrent_runs": int(run.max_concurrency) if run.max_concurrency else None,
            "spec_hash": hashes["spec"], "compiled_hash": hashes["compiled"]}
