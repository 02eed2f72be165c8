"""A fake Kubeflow Pipelines API server (v2beta1 REST), the subset `kfp.Client` 2.5 uses for runs,
experiments and recurring runs. Paths and snake_case bodies are those of `kfp_server_api` 2.0.5
(`kfp_server_api/api/*_service_api.py`, `models/v2beta1_*.py`).

It refuses what the real server refuses (400, with the server's words), so a test cannot pass on a
request the service would reject: a body with a field its API type does not have (grpc-gateway's
protojson), a pipeline spec the backend refuses or cannot run (kfp_rules.backend_problems), a
recurring run's max concurrency outside 1-10 or a cron robfig/cron v1.2.0's `cron.Parse` refuses (judged
by that code itself: tests/conformance/cron_judge.py).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

import kfp_server_api.models

from tests.conformance.cron_judge import KFP_REFUSAL, kfp_problem
from tests.kubeflow.fake_http import FakeServer
from tests.kubeflow.kfp_rules import backend_problems

_API = "/apis/v2beta1"
_TIME = "2030-01-01T03:00:00Z"


def _matches(item: dict[str, Any], raw_filter: str | None) -> bool:
    """The EQUALS predicates of a KFP filter (JSON of filter.proto), the only ones kfp.Client sends."""
    if not raw_filter:
        return True
    for predicate in json.loads(raw_filter).get("predicates", []):
        value = predicate.get("stringValue", predicate.get("string_value"))
        if predicate.get("operation") in (1, "EQUALS") and item.get(predicate["key"]) != value:
            return False
    return True


def unknown_fields(value: Any, type_name: str, path: str) -> list[str]:
    """The fields of ``value`` that the kfp_server_api model ``type_name`` does not have, recursively."""
    if type_name.startswith("list[") and isinstance(value, list):
        return [p for i, item in enumerate(value) for p in unknown_fields(item, type_name[5:-1], f"{path}[{i}]")]
    model = getattr(kfp_server_api.models, type_name, None)
    if model is None or not getattr(model, "openapi_types", None):  # str, object, dict(str, object), enums
        return []
    if not isinstance(value, dict):
        return [f"{path}: expected an object"]
    fields = {json_key: attribute for attribute, json_key in model.attribute_map.items()}
    problems = []
    for key, item in value.items():
        if key not in fields:
            problems.append(f'{path}: unknown field "{key}"')
        else:
            problems += unknown_fields(item, model.openapi_types[fields[key]], f"{path}.{key}")
    return problems


def _invalid(message: str) -> tuple[int, Any]:
    return 400, {"error": message, "code": 3, "message": message, "details": []}


@dataclass(repr=False)  # the default repr would print every request in tracebacks
class FakeKfp(FakeServer):
    """Runs walk through `run_states` (the create answer is the first, each GET the next, the last one
    sticks); `run_error` is the run's `error` once it is FAILED."""

    run_states: list[str] = field(default_factory=lambda: ["PENDING", "RUNNING", "SUCCEEDED"])
    run_error: dict[str, Any] | None = None
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    recurring_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.route("GET", _API + "/healthz", lambda m, q, b: (200, {"multi_user": False}))
        self.route("GET", _API + "/experiments", self._list_experiments)
        self.route("POST", _API + "/experiments", self._create_experiment)
        self.route("GET", _API + r"/experiments/(?P<id>[^/:]+)", lambda m, q, b: (200, self.experiments[m["id"]]))
        self.route("POST", _API + "/runs", self._create_run)
        self.route("GET", _API + "/runs", self._list_runs)
        self.route("GET", _API + r"/runs/(?P<id>[^/:]+)", self._get_run)
        self.route("POST", _API + "/recurringruns", self._create_recurring_run)
        self.route("GET", _API + "/recurringruns", self._list_recurring_runs)
        self.route("GET", _API + r"/recurringruns/(?P<id>[^/:]+)",
                   lambda m, q, b: (200, self.recurring_runs[m["id"]]))
        self.route("POST", _API + r"/recurringruns/(?P<id>[^/:]+):enable", self._set_status("ENABLED"))
        self.route("POST", _API + r"/recurringruns/(?P<id>[^/:]+):disable", self._set_status("DISABLED"))
        self.route("DELETE", _API + r"/recurringruns/(?P<id>[^/:]+)", self._delete_recurring_run)

    def _new_id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}"

    # ------------------------------------------------------------------ experiments

    def _list_experiments(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        found = [e for e in self.experiments.values() if _matches(e, query.get("filter"))]
        return 200, {"experiments": found, "total_size": len(found)} if found else {}

    def _refused(self, body: Any, type_name: str) -> tuple[int, Any] | None:
        """The 400 the server answers ``body`` with, or None when it takes it."""
        problems = unknown_fields(body, type_name, type_name)
        if problems:
            return _invalid(f"Invalid input error: failed to parse the request body: {'; '.join(problems)}")
        if isinstance(body.get("pipeline_spec"), dict):
            problems = backend_problems(body["pipeline_spec"])
            if problems:
                return _invalid(f"Invalid input error: invalid v2 pipeline spec: {'; '.join(problems)}")
        return None

    def _create_experiment(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if refused := self._refused(body, "V2beta1Experiment"):
            return refused
        experiment_id = self._new_id("experiment")
        experiment = {**body, "experiment_id": experiment_id, "created_at": _TIME, "storage_state": "AVAILABLE"}
        self.experiments[experiment_id] = experiment
        return 200, experiment

    # ------------------------------------------------------------------ runs

    def _run_view(self, run: dict[str, Any]) -> dict[str, Any]:
        state = self.run_states[min(run["_polls"], len(self.run_states) - 1)]
        view = {key: value for key, value in run.items() if not key.startswith("_")}
        view["state"] = state
        if state in ("FAILED", "CANCELED") and self.run_error:
            view["error"] = self.run_error
        return view

    def _create_run(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if refused := self._refused(body, "V2beta1Run"):
            return refused
        run_id = self._new_id("run")
        run = {**copy.deepcopy(body), "run_id": run_id, "created_at": _TIME, "_polls": 0}
        self.runs[run_id] = run
        return 200, self._run_view(run)

    def _list_runs(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        """One page of every run (the API's page_size, 20 by default), of an experiment where asked."""
        found = [self._run_view(run) for run in self.runs.values()
                 if query.get("experiment_id") in (None, run.get("experiment_id")) and _matches(run, query.get("filter"))]
        size = int(query.get("page_size") or 20)
        start = int(query.get("page_token") or 0)
        page = found[start:start + size]
        more = {"next_page_token": str(start + size)} if start + size < len(found) else {}
        return 200, {"runs": page, "total_size": len(found), **more} if page else {}

    def _get_run(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        run = self.runs[match["id"]]
        run["_polls"] += 1
        return 200, self._run_view(run)

    # ------------------------------------------------------------------ recurring runs

    def add_recurring_run(self, body: dict[str, Any]) -> dict[str, Any]:
        """Store a recurring run as the server would (also for tests that seed one)."""
        recurring_run_id = self._new_id("recurring")
        status = "DISABLED" if body.get("mode") == "DISABLE" else "ENABLED"
        recurring_run = {**copy.deepcopy(body), "recurring_run_id": recurring_run_id, "status": status,
                         "created_at": _TIME, "updated_at": _TIME}
        self.recurring_runs[recurring_run_id] = recurring_run
        return recurring_run

    def _create_recurring_run(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if refused := self._refused(body, "V2beta1RecurringRun"):
            return refused
        concurrency = int(body.get("max_concurrency") or 0)
        if not 1 <= concurrency <= 10:
            return _invalid("Invalid input error: Max concurrency of a recurring run must be at least 1 and at "
                            f"most 10. Received {concurrency}")
        cron = ((body.get("trigger") or {}).get("cron_schedule") or {}).get("cron")
        if cron is not None and (problem := kfp_problem(cron)):
            return _invalid(KFP_REFUSAL.format(problem))
        return 200, self.add_recurring_run(body)

    def _list_recurring_runs(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        found = [r for r in self.recurring_runs.values() if _matches(r, query.get("filter"))
                 and query.get("experiment_id") in (None, r.get("experiment_id"))]
        # This one list is camelCase in KFP's API (its proto field is `recurringRuns`), see
        # kfp_server_api/models/v2beta1_list_recurring_runs_response.py.
        return 200, {"recurringRuns": found, "total_size": len(found)} if found else {}

    def _set_status(self, status: str) -> Any:
        def handler(match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
            recurring_run = self.recurring_runs[match["id"]]
            recurring_run["status"] = status
            recurring_run["mode"] = "ENABLE" if status == "ENABLED" else "DISABLE"
            return 200, {}
        return handler

    def _delete_recurring_run(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        del self.recurring_runs[match["id"]]
        return 200, {}
