"""A fake Vertex AI REST API (v1): the subset google-cloud-aiplatform 1.165 uses for pipeline jobs and
schedules, plus the Cloud Storage bucket lookup `PipelineJob.submit` makes (reach it by pointing
STORAGE_EMULATOR_HOST at this server). The SDK then checks that the bucket's project number is the
project's, which it asks Resource Manager over gRPC; the fixture answers that with PROJECT_NUMBER.

Paths and bodies are those of the generated REST transports
(`aiplatform_v1/services/{pipeline,schedule}_service/transports/rest_base.py`): camelCase JSON,
enums sent as integers (`$alt=json;enum-encoding=int`), answered here by name (the SDK parses both).

It refuses what the service refuses (400 INVALID_ARGUMENT or FAILED_PRECONDITION, Google's error
shape): a body that does not parse strictly into aiplatform_v1's PipelineJob or Schedule (unknown
fields included), an update mask naming no Schedule field, a cron that is not five fields after an optional
`TZ=<zone> ` or `CRON_TZ=<zone> ` (judged by robfig/cron v3's standard parser, which reads those prefixes,
standing in for Vertex's own, which is not public: tests/conformance/cron_judge.py; the words are that
parser's), pausing a schedule that is not active and resuming one that is not paused.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from google.cloud.aiplatform_v1.types import PipelineJob, Schedule
from google.protobuf import json_format

from tests.conformance.cron_judge import vertex_problem
from tests.kubeflow.fake_http import FakeServer

_PARENT = r"/v1/(?P<parent>projects/[^/]+/locations/[^/]+)"
_TIME = "2030-01-01T03:00:00Z"
PROJECT_NUMBER = "123456789012"  # every bucket belongs to it; see the fake_vertex fixture


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _error(code: int, status: str, message: str) -> tuple[int, Any]:
    return code, {"error": {"code": code, "message": message, "status": status}}


def _parse_problem(body: Any, message_type: Any) -> str | None:
    """Why ``body`` does not parse into the API type (as the service's JSON parser refuses it), or None."""
    try:
        json_format.ParseDict(body, message_type.pb(message_type()))
    except (json_format.ParseError, TypeError) as exc:
        return f"Invalid JSON payload received. {exc}"
    return None


def _cron_problem(cron: str) -> str | None:
    problem = vertex_problem(cron)
    return f"Invalid cron {cron!r}: {problem}" if problem else None


@dataclass(repr=False)  # the default repr would print every request in tracebacks
class FakeVertex(FakeServer):
    """Pipeline jobs walk through `job_states` (the create answer is the first, each GET the next, the
    last one sticks); `job_error` is the job's `error` once it is in a failed state."""

    job_states: list[str] = field(default_factory=lambda: ["PIPELINE_STATE_PENDING",
                                                           "PIPELINE_STATE_RUNNING",
                                                           "PIPELINE_STATE_SUCCEEDED"])
    job_error: dict[str, Any] | None = None
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    buckets: set[str] = field(default_factory=set)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1001))

    def __post_init__(self) -> None:
        self.route("GET", r"/storage/v1/b/(?P<bucket>[^/]+)", self._get_bucket)
        self.route("POST", _PARENT + r"/pipelineJobs", self._create_job)
        self.route("GET", _PARENT + r"/pipelineJobs/(?P<id>[^/:]+)", self._get_job)
        self.route("GET", _PARENT + r"/pipelineJobs", self._list_jobs)
        self.route("POST", _PARENT + r"/schedules", self._create_schedule)
        self.route("GET", _PARENT + r"/schedules", self._list_schedules)
        self.route("GET", _PARENT + r"/schedules/(?P<id>[^/:]+)", self._get_schedule)
        self.route("PATCH", _PARENT + r"/schedules/(?P<id>[^/:]+)", self._update_schedule)
        self.route("POST", _PARENT + r"/schedules/(?P<id>[^/:]+):pause", self._pause)
        self.route("POST", _PARENT + r"/schedules/(?P<id>[^/:]+):resume", self._resume)
        self.route("DELETE", _PARENT + r"/schedules/(?P<id>[^/:]+)", self._delete_schedule)

    # ------------------------------------------------------------------ storage

    def _get_bucket(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        self.buckets.add(match["bucket"])
        return 200, {"kind": "storage#bucket", "name": match["bucket"], "id": match["bucket"],
                     "projectNumber": PROJECT_NUMBER}

    # ------------------------------------------------------------------ pipeline jobs

    def _job_view(self, job: dict[str, Any]) -> dict[str, Any]:
        state = self.job_states[min(job["_polls"], len(self.job_states) - 1)]
        view = {key: value for key, value in job.items() if not key.startswith("_")}
        view["state"] = state
        if state in ("PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED") and self.job_error:
            view["error"] = self.job_error
        return view

    def _create_job(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if problem := _parse_problem(body, PipelineJob):
            return _error(400, "INVALID_ARGUMENT", problem)
        job_id = query.get("pipelineJobId") or f"job-{next(self._ids)}"
        name = f"{match['parent']}/pipelineJobs/{job_id}"
        job = {**copy.deepcopy(body), "name": name, "createTime": _TIME, "_polls": 0}
        self.jobs[name] = job
        return 200, self._job_view(job)

    def _get_job(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        job = self.jobs[f"{match['parent']}/pipelineJobs/{match['id']}"]
        job["_polls"] += 1
        return 200, self._job_view(job)

    def _list_jobs(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        """The parent's jobs, filtered by a label as `labels.KEY="VALUE"` (AIP-160, as Vertex takes it);
        another filter is refused, not ignored."""
        raw = query.get("filter", "")
        wanted = re.fullmatch(r'\s*labels\.([\w-]+)\s*=\s*"([^"]*)"\s*', raw)
        if raw and wanted is None:
            return _error(400, "INVALID_ARGUMENT", f"the fake takes only a labels.KEY=\"VALUE\" filter, not {raw!r}")
        found = [self._job_view(job) for name, job in self.jobs.items() if name.startswith(match["parent"] + "/")
                 and (wanted is None or job.get("labels", {}).get(wanted.group(1)) == wanted.group(2))]
        return 200, {"pipelineJobs": found} if found else {}

    # ------------------------------------------------------------------ schedules

    def add_schedule(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store a schedule as the service would (also for tests that seed one)."""
        name = f"{parent}/schedules/{next(self._ids)}"
        schedule = {**copy.deepcopy(body), "name": name, "state": "ACTIVE", "createTime": _TIME,
                    "nextRunTime": _TIME, "startedRunCount": "0"}
        self.schedules[name] = schedule
        return schedule

    def _create_schedule(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if problem := _parse_problem(body, Schedule) or _cron_problem(body.get("cron", "")):
            return _error(400, "INVALID_ARGUMENT", problem)
        return 200, self.add_schedule(match["parent"], body)

    def _list_schedules(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        wanted = re.search(r'display_?[nN]ame\s*=\s*"([^"]*)"', query.get("filter", ""))
        found = [s for name, s in self.schedules.items() if name.startswith(match["parent"] + "/")
                 and (wanted is None or s.get("displayName") == wanted.group(1))]
        return 200, {"schedules": found} if found else {}

    def _schedule(self, match: re.Match[str]) -> dict[str, Any]:
        return self.schedules[f"{match['parent']}/schedules/{match['id']}"]

    def _get_schedule(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        return 200, self._schedule(match)

    def _update_schedule(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        schedule = self._schedule(match)
        paths = [path for path in query.get("updateMask", "").split(",") if path]
        fields = set(Schedule.pb(Schedule()).DESCRIPTOR.fields_by_name)
        # a FieldMask's paths, in its JSON form camelCase, name fields of the Schedule
        unknown = [path for path in paths if re.sub(r"([A-Z])", r"_\1", path.split(".")[0]).lower() not in fields]
        problem = (_parse_problem(body, Schedule) or (f"Invalid update mask paths: {unknown}" if unknown else None)
                   or ("an update mask is required" if not paths else None)
                   or (_cron_problem(body["cron"]) if "cron" in body else None))
        if problem:
            return _error(400, "INVALID_ARGUMENT", problem)
        for path in paths:
            key = _camel(path)
            if key in body:
                schedule[key] = body[key]
            else:
                schedule.pop(key, None)
        schedule["updateTime"] = _TIME
        return 200, schedule

    def _pause(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        return self._transition(match, "ACTIVE", "PAUSED")

    def _resume(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        return self._transition(match, "PAUSED", "ACTIVE")

    def _transition(self, match: re.Match[str], source: str, target: str) -> tuple[int, Any]:
        schedule = self._schedule(match)
        if schedule["state"] != source:
            return _error(400, "FAILED_PRECONDITION", f"Schedule {schedule['name']} is {schedule['state']}, not "
                          f"{source}, so it cannot become {target}.")
        schedule["state"] = target
        return 200, {}

    def _delete_schedule(self, match: re.Match[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        name = f"{match['parent']}/schedules/{match['id']}"
        del self.schedules[name]
        return 200, {"name": f"{name}/operations/1", "done": True,
                     "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}
