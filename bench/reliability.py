"""Reliability (issues 8 and 18): the failure-case tests of the suite run once more, counted by kind.

Each case is a test that asserts what "handled well" means for it (exit code, file:line:col and key
path with a hint, the file/line or feature named, nothing written, ML Metadata intact, the rerun
reusing what had finished), so a case counts as handled when its test passes. The baseline column is
the number of cases tried; the target is all of them.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import common

NAME = "reliability"
# kind -> what "handled well" means; the cases are the tests marked `@pytest.mark.reliability(KIND)`
# (tests/conftest.py records the kind in the junit report), so a renamed or moved test stays counted
MEANINGS: dict[str, str] = {
    "bad spec": "exit 2, file:line:col at a key or value, key path and hint, no traceback, nothing written by "
                "validate, run or compile",
    "bad data": "stopped at ExampleGen/ExampleValidator/Transform naming the file:line, the feature or the class "
                "and split, or skipped and counted under bad_records: skip",
    "crash point": "killed, interrupted (SIGINT, SIGTERM) or retried in place, then the rerun completes from the "
                   "cache or the last backed-up step, nothing half-written marked complete",
    "environment fault": "a damaged ML Metadata store or a full disk: stopped naming the file or root and what to "
                         "do, nothing overwritten or half-written",
    "compiled file": "no local path, environment value or credential; byte-identical",
}


def _cases(report: str) -> list[dict]:
    """Every reliability case in a junit XML report, once each: its id, kind, outcome and seconds."""
    cases: dict[str, dict] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [p.get("value") for p in case.iter("property") if p.get("name") == "reliability"]
        if not kinds:
            continue
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        cases[key] = {"id": key, "kind": kinds[0], "outcome": outcome, "seconds": float(case.get("time", 0))}
    return list(cases.values())


def run(quick: bool = False) -> dict:
    paths = ["tests/pipeline/spec/test_spec_errors.py"] if quick else ["tests"]
    report = os.path.join(common.scratch("reliability"), "report.xml")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "reliability",
                    f"--junitxml={report}", *paths], cwd=common.REPO, stdout=subprocess.DEVNULL, check=False)
    cases = _cases(report)
    kinds = {}
    for kind, meaning in MEANINGS.items():
        chosen = [c for c in cases if c["kind"] == kind]
        kinds[kind] = {"meaning": meaning, "tried": len(chosen),
                       "handled": sum(c["outcome"] == "passed" for c in chosen),
                       "not_handled": [f"{c['id']} ({c['outcome']})" for c in chosen if c["outcome"] != "passed"],
                       "seconds": sum(c["seconds"] for c in chosen)}
    return {"name": NAME, "date": datetime.date.today().isoformat(), "cpus": os.cpu_count(), "kinds": kinds,
            "targets": [common.target(f"Reliability: {kind}", "all", k["tried"] and k["handled"] == k["tried"])
                        for kind, k in kinds.items()]}


def table_rows(result: dict) -> list[str]:
    rows = []
    for (kind, k), judged in zip(result["kinds"].items(), result["targets"], strict=True):
        rows.append(f"| Reliability: {kind} handled well (what that means: Reliability below) | "
                    f"{k['handled']} handled | {k['tried']} tried | {k['handled']}/{k['tried']} "
                    f"| {common.judged(judged)} |")
    return rows


def details(result: dict) -> str:
    lines = ["### Reliability", "", f"Run on {result['date']} ({result['cpus']} CPUs) by `make bench` or on its own by "
             "`python bench/run.py reliability`, which updates only this part of the file.", "", "| kind | handled well means | tried | handled well | test seconds | not handled |",
             "|---|---|---|---|---|---|"]
    for kind, k in result["kinds"].items():
        lines.append(f"| {kind} | {k['meaning']} | {k['tried']} | {k['handled']} | {k['seconds']:.0f} | "
                     f"{', '.join(k['not_handled']) or 'none'} |")
    lines += ["", "Each case is a test of `make test` (selected in bench/reliability.py) whose assertions say what "
              "handled well means for it; a case counts as handled when its test passes. Cases are the tests marked "
              "`@pytest.mark.reliability(KIND)`, each counted once; valid data that only looks odd (NaN as missing, "
              "1 MB fields, extra columns, valid labels) is tested but not counted. Nothing is lost in a handled "
              "case: the tests check that nothing is written for a bad spec, that no half-written artifact is "
              "marked complete in ML Metadata after a crash, and that the rerun's model is blessed."]
    return "\n".join(lines)
