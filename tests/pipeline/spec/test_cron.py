from __future__ import annotations

import pytest

from tfxd.pipeline.spec.cron import cron_problem, timezone_problem


@pytest.mark.parametrize("cron", ["0 3 * * 1", "*/15 * * * *", "0 0 1 JAN,JUL *", "0 9-17 * * MON-FRI",
                                  "5,35 1-5/2 1 * 0"])
def test_valid_cron(cron):
    assert cron_problem(cron) is None


@pytest.mark.parametrize(("cron", "needle"), [("0 3 * *", "5 fields"), ("60 * * * *", "minute field"),
                                              ("0 3 * 13 *", "month field"), ("0 3 * * 8", "day of week"),
                                              ("0 5-3 * * *", "backwards"), ("*/0 * * * *", "step of 0"),
                                              ("0 3 ? * *", "not cron syntax")])
def test_invalid_cron(cron, needle):
    assert needle in cron_problem(cron)


def test_timezones():
    assert timezone_problem("Europe/Berlin") is None
    assert timezone_problem("UTC") is None
    assert "unknown time zone" in timezone_problem("Europe/Atlantis")
    assert timezone_problem("../etc/passwd") is not None
