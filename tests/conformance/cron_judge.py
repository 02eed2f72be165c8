"""Crons judged by the parsers the schedulers run, not by tfxd's pipeline/spec/cron.py: build/conformance/cron
(conformance/cron/main.go, built by `make conformance`) with

- "kfp": github.com/robfig/cron v1.2.0's `cron.Parse`, the call kubeflow/pipelines makes on a recurring
  run's cron (backend/src/apiserver/server/api_converter.go, toModelJob) and again on each tick
  (backend/src/crd/controller/scheduledworkflow/util/cron_schedule.go);
- "vertex": github.com/robfig/cron/v3 v3.0.1's `cron.ParseStandard`, a stand-in: Vertex AI's parser is not
  public, and its Schedule.cron documents five fields after an optional "TZ=<zone> " or "CRON_TZ=<zone> ",
  the prefixes robfig/cron v3 reads (loading the zone from the IANA database Go ships).

The fake servers ask for one cron per request; one process judges each batch of crons not seen before,
and every answer is kept, so a suite starts the program a few times, not once a request.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

JUDGE = Path(__file__).resolve().parents[2] / "build" / "conformance" / "cron"
# the server's own words around robfig/cron's error (api_converter.go, toModelJob)
KFP_REFUSAL = ("Invalid input error: Schedule cron is not a supported format"
               "(https://godoc.org/github.com/robfig/cron). Error: {}")

_verdicts: dict[tuple[str, str], str | None] = {}
_lock = threading.Lock()


def problems(mode: str, crons: Iterable[str]) -> dict[str, str | None]:
    """Each cron's refusal by the ``mode`` parser ("kfp" or "vertex") in its words, or None where taken."""
    crons = list(crons)
    with _lock:
        unseen = [cron for cron in dict.fromkeys(crons) if (mode, cron) not in _verdicts]
        if unseen:
            _verdicts.update(((mode, cron), error) for cron, error in _judge(mode, unseen))
        return {cron: _verdicts[(mode, cron)] for cron in crons}


def kfp_problem(cron: str) -> str | None:
    return problems("kfp", [cron])[cron]


def vertex_problem(cron: str) -> str | None:
    return problems("vertex", [cron])[cron]


def _judge(mode: str, crons: list[str]) -> list[tuple[str, str | None]]:
    assert JUDGE.is_file(), f"{JUDGE} is missing: `make conformance` builds it (make test does)"
    result = subprocess.run([str(JUDGE), mode], input="".join(json.dumps(cron) + "\n" for cron in crons),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [answer["cron"] for answer in answers] == crons, result.stdout
    return [(answer["cron"], answer["error"]) for answer in answers]
