"""Reliability (issue 8): the failure-case tests of the suite run once more, counted by kind.

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
# kind -> (what "well" means, the tests that try it: file, or file::test-name prefix)
KINDS: dict[str, tuple[str, list[str]]] = {
    "bad specs": ("exit 2, file:line:col, key path and hint, no traceback, nothing written", [
        "tests/pipeline/test_spec_errors.py::test_",
    ]),
    "bad data": ("stopped at ExampleGen/ExampleValidator/Transform naming the file:line or feature, or "
                 "skipped and counted under bad_records: skip", [
        "tests/components/example_gen/test_bad_data.py",
        "tests/components/example_gen/test_executor.py::test_bad_records",
        "tests/components/example_gen/test_executor.py::test_pinned_type_mismatch",
        "tests/components/example_gen/test_executor.py::test_invalid_json_line",
        "tests/components/example_gen/test_executor.py::test_empty_and_header_only",
        "tests/components/example_gen/test_executor.py::test_a_split_that_ends_up_empty",
        "tests/components/transform/test_labels.py",
        "tests/pipeline/test_run_cli.py::test_a_bad_record_fails_the_run",
        "tests/pipeline/test_run_cli.py::test_a_column_whose_type_changed",
    ]),
    "crash points": ("rerun completes from the cache (or the last checkpoint), nothing half-written marked "
                     "complete, clear message and exit code", [
        "tests/pipeline/test_crash_resume.py",
        "tests/trainer_module/test_worker_crash.py",
    ]),
    "compiled specs": ("no local path, environment value or credential; byte-identical", [
        "tests/kubeflow/test_compile.py::test_no_local_paths",
        "tests/kubeflow/test_compile.py::test_only_interpolated_environment",
    ]),
}


NOT_CASES = ("test_enough_wrong_specs",)  # counts the corpus; tries nothing itself


def _selected(path: str, name: str, selectors: list[str]) -> bool:
    if name.startswith(NOT_CASES):
        return False
    for selector in selectors:
        file, _, prefix = selector.partition("::")
        if path == file and name.startswith(prefix):
            return True
    return False


def _cases(report: str) -> list[dict]:
    """Every test case in a junit XML report: its file, name, outcome and seconds."""
    cases = []
    for case in ET.parse(report).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"  # module-level tests: the module
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
        cases.append({"file": path, "name": case.get("name", ""), "outcome": outcome,
                      "seconds": float(case.get("time", 0))})
    return cases


def run(quick: bool = False) -> dict:
    files = sorted({selector.partition("::")[0] for _, selectors in KINDS.values() for selector in selectors})
    if quick:
        files = ["tests/pipeline/test_spec_errors.py"]
    report = os.path.join(common.scratch("reliability"), "report.xml")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    *files], cwd=common.REPO, stdout=subprocess.DEVNULL, check=False)
    cases = _cases(report)
    kinds = {}
    for kind, (meaning, selectors) in KINDS.items():
        chosen = [c for c in cases if _selected(c["file"], c["name"], selectors)]
        kinds[kind] = {"meaning": meaning, "tried": len(chosen),
                       "handled": sum(c["outcome"] == "passed" for c in chosen),
                       "not_handled": [f"{c['file']}::{c['name']} ({c['outcome']})" for c in chosen
                                       if c["outcome"] != "passed"],
                       "seconds": sum(c["seconds"] for c in chosen)}
    return {"name": NAME, "date": datetime.date.today().isoformat(), "cpus": os.cpu_count(), "kinds": kinds}


def table_rows(result: dict) -> list[str]:
    rows = []
    for kind, k in result["kinds"].items():
        verdict = "met" if k["tried"] and k["handled"] == k["tried"] else "NOT met"
        rows.append(f"| Reliability: {kind} handled well (what that means: Reliability below) | "
                    f"{k['handled']} handled | {k['tried']} tried | {k['handled']}/{k['tried']} | all: {verdict} |")
    return rows


def details(result: dict) -> str:
    lines = ["### Reliability", "", f"Run on {result['date']} ({result['cpus']} CPUs) by `make bench` or on its own by "
             "`python bench/run.py reliability`, which updates only this part of the file.", "", "| kind | handled well means | tried | handled well | test seconds | not handled |",
             "|---|---|---|---|---|---|"]
    for kind, k in result["kinds"].items():
        lines.append(f"| {kind} | {k['meaning']} | {k['tried']} | {k['handled']} | {k['seconds']:.0f} | "
                     f"{', '.join(k['not_handled']) or 'none'} |")
    lines += ["", "Each case is a test of `make test` (selected in bench/reliability.py) whose assertions say what "
              "handled well means for it; a case counts as handled when its test passes. Nothing is lost in a "
              "handled case: the tests check that nothing is written for a bad spec, that no half-written artifact "
              "is marked complete in ML Metadata after a crash, and that the rerun's model is blessed."]
    return "\n".join(lines)
