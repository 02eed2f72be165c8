"""Every cron `tfxd schedule` writes, judged by the parsers the schedulers run, not by tfxd's own
pipeline/spec/cron.py (tests/conformance/cron_judge.py runs build/conformance/cron, conformance/cron/main.go):

- Kubeflow Pipelines: kfp_cron's six fields, by github.com/robfig/cron v1.2.0's `cron.Parse`, the call
  kubeflow/pipelines makes on a recurring run (backend/src/apiserver/server/api_converter.go, toModelJob)
  and on each tick (backend/src/crd/controller/scheduledworkflow/util/cron_schedule.go).
- Vertex AI: vertex_cron's `TZ=<zone> ` and five fields, by github.com/robfig/cron/v3 v3.0.1's
  `cron.ParseStandard`. Vertex's own parser is not public; this one is a fair stand-in: Schedule.cron
  documents five fields by Wikipedia's page after "TZ=${IANA_TIME_ZONE}" or "CRON_TZ=${IANA_TIME_ZONE}", the
  prefixes robfig/cron v3 introduced and reads (loading the zone from the IANA database), and it takes the
  unix fields with names, ranges, steps and lists, days of the week 0-6.

The crons are a spread of what a spec may hold (tfxd takes each) and every schedule in the docs and the
Kubeflow tests' spec. Each judge bites: it refuses what its parser refuses, in the parser's words, and so
do the fake servers.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conformance.cron_judge import KFP_REFUSAL, kfp_problem, problems, vertex_problem
from tests.conftest import REPO
from tests.kubeflow.fake_kfp import FakeKfp
from tests.kubeflow.fake_vertex import FakeVertex
from tfxd.kubeflow.kubeflow_pipelines import kfp_cron
from tfxd.kubeflow.vertex import vertex_cron
from tfxd.pipeline.spec.cron import cron_problem
from tfxd.pipeline.spec.targets import Schedule

SPREAD = [
    "0 3 * * 1", "*/15 8-18 * * 1-5", "5,35 1-5/2 1 * 0", "00 03 * * 01", "0 0 29 FEB *",
    "0 0 1 JAN,JUL *", "0 0 1 jan-jun/2 *", "59 23 31 DEC SAT,SUN", "0 9-17 * * MON-FRI", "0 12 * * sun",
    "0 0 1-31/10 * *", "*/59 */23 */31 */12 */7", "0 */6 */2 */3 */2",
    # day of week 7 is Sunday to tfxd, and to neither parser: tfxd writes 0 (cron.with_sunday_as_zero)
    "0 3 * * 7", "0 3 1 JAN,JUL 5-7", "0 0 * * 0-7", "0 0 * * 1,7", "0 9 * * MON-7", "0 9 * * 1-7/2",
    "0 9 * * 2-7/3", "0 9 * * 7-7", "0 9 * * 7/2",
]
SCHEDULE = re.compile(r"""schedule: \{cron: ["']([^"']+)["'](?:, timezone: ([\w/+-]+))?""")
WRITTEN_BY = [REPO / "docs" / "targets.md", REPO / "tests" / "kubeflow" / "conftest.py",
              *sorted((REPO / "examples").glob("*.yaml"))]
ZONES = ["UTC", "Europe/Berlin", "America/Los_Angeles", "Asia/Kolkata", "Australia/Lord_Howe"]


def documented() -> list[tuple[str, str]]:
    """(cron, time zone) of each schedule the docs, the examples and the Kubeflow tests' spec hold."""
    found = [(cron, zone or "UTC") for path in WRITTEN_BY for cron, zone in SCHEDULE.findall(path.read_text())]
    assert len(found) >= 4, found  # docs/targets.md's two and tests/kubeflow/conftest.py's two at least
    return found


def spec_crons() -> list[str]:
    return SPREAD + [cron for cron, _ in documented()]


def test_tfxd_takes_every_cron_judged_here():
    assert {cron: cron_problem(cron) for cron in spec_crons()} == dict.fromkeys(spec_crons())


def test_kubeflow_pipelines_parses_every_cron_tfxd_writes():
    written = [kfp_cron(Schedule(cron=cron)) for cron in spec_crons()]  # KFP's zone is UTC (kfp_cron)
    assert problems("kfp", written) == dict.fromkeys(written)


def test_the_vertex_stand_in_parses_every_cron_tfxd_writes():
    written = [vertex_cron(Schedule(cron=cron, timezone=zone)) for cron in SPREAD for zone in ZONES]
    written += [vertex_cron(Schedule(cron=cron, timezone=zone)) for cron, zone in documented()]
    assert problems("vertex", written) == dict.fromkeys(written)


@pytest.mark.parametrize(("cron", "written"), [
    ("0 3 * * 7", "0 0 3 * * 0"), ("0 9 * * MON-7", "0 0 9 * * MON-6,0"), ("0 9 * * 1-7/2", "0 0 9 * * 1-6/2,0"),
    ("0 9 * * 2-7/3", "0 0 9 * * 2-6/3"), ("0 9 * * 7-7", "0 0 9 * * 0"), ("0 9 * * 1,5-7", "0 0 9 * * 1,5-6,0"),
])
def test_sunday_is_written_0_which_is_what_robfig_cron_takes(cron, written):
    # tfxd wrote MON-7, 1-7/2 and 7-7 as they were until the judge refused them (7 is above robfig's 6)
    assert kfp_cron(Schedule(cron=cron)) == written
    assert vertex_cron(Schedule(cron=cron, timezone="Europe/Berlin")) == f"TZ=Europe/Berlin {written[2:]}"
    assert kfp_problem(f"0 {cron}") == f"End of range (7) above maximum (6): {cron.split()[-1].split(',')[-1]}"


def test_tfxd_refuses_a_step_kubeflow_pipelines_cannot_read():
    step = "9" * 20  # past a Go int: strconv.Atoi fails, and tfxd took it before the judge said so
    assert kfp_problem(f"0 */{step} * * * *") == (
        f'Failed to parse int from {step}: strconv.Atoi: parsing "{step}": value out of range')
    assert cron_problem(f"*/{step} * * * *") == f"the minute field '*/{step}' has a step beyond 59"


KFP_REFUSES = {  # robfig/cron v1.2.0's words
    "0 3 * * 1 2 3": "Expected 5 to 6 fields, found 7: 0 3 * * 1 2 3",
    "0 0 3 * * 7": "End of range (7) above maximum (6): 7",
    "0 0 25 * * *": "End of range (25) above maximum (23): 25",
    "0 0 3 * * MON-SUN": "Beginning of range (1) beyond end of range (0): MON-SUN",
    "0 0 3 * JANUARY *": "Failed to parse int from JANUARY: strconv.Atoi: parsing \"JANUARY\": invalid syntax",
}


def test_the_kfp_judge_and_the_fake_server_refuse_what_cron_parse_refuses():
    assert problems("kfp", KFP_REFUSES) == KFP_REFUSES
    # five fields are taken, read seconds first: why kfp_cron puts a seconds field before the spec's five
    assert kfp_problem("0 3 * * 1") is None
    fake = FakeKfp()
    for cron, words in KFP_REFUSES.items():
        status, answer = fake.dispatch("POST", "/apis/v2beta1/recurringruns", json.dumps(
            {"display_name": "x", "mode": "ENABLE", "max_concurrency": "1",
             "trigger": {"cron_schedule": {"cron": cron}}}).encode())
        assert (status, answer["message"]) == (400, KFP_REFUSAL.format(words))
    assert fake.recurring_runs == {}


VERTEX_REFUSES = {  # robfig/cron v3.0.1's words
    "TZ=UTC 0 3 * * 7": "end of range (7) above maximum (6): 7",
    "TZ=Mars/Olympus 0 3 * * *": "provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
    "CRON_TZ=UTC 0 0 3 * * *": "expected exactly 5 fields, found 6: [0 0 3 * * *]",
    "TZ=UTC 0 3 * 13 *": "end of range (13) above maximum (12): 13",
}


def test_the_vertex_judge_and_the_fake_service_refuse_what_parse_standard_refuses():
    assert problems("vertex", VERTEX_REFUSES) == VERTEX_REFUSES
    assert vertex_problem("CRON_TZ=America/New_York 1 * * * *") is None  # Schedule.cron's own example
    fake = FakeVertex()
    for cron, words in VERTEX_REFUSES.items():
        status, answer = fake.dispatch("POST", "/v1/projects/p/locations/us-central1/schedules",
                                       json.dumps({"displayName": "x", "cron": cron}).encode())
        assert (status, answer["error"]["status"]) == (400, "INVALID_ARGUMENT")
        assert answer["error"]["message"] == f"Invalid cron {cron!r}: {words}"
    assert fake.schedules == {}
