"""A fake Kubeflow Pipelines API server (v2beta1 REST), the subset `kfp.Client` 2.5 uses for runs,
experiments and recurring runs. Paths and snake_case bodies are those of `kfp_server_api` 2.0.5
(`kfp_server_api/api/*_service_api.py`, `models/v2beta1_*.py`).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.kubeflow.fake_http import FakeServer

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

    def _create_experiment(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
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
        run_id = self._new_id("run")
        run = {**copy.deepcopy(body), "run_id": run_id, "created_at": _TIME, "_polls": 0}
        self.runs[run_id] = run
        return 200, self._run_view(run)

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
