"""A stop asked for by a signal stays a stop wherever it is raised, so TFX records the component as
interrupted (CANCELED once settled), not failed."""

from __future__ import annotations

import signal

import pytest

from tfxd import stops


def _stop(_element):
    raise stops.Stopped(signal.SIGTERM)


def test_a_stop_raised_inside_a_beam_step_comes_out_of_the_pipeline_as_a_stop():
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from tfxd.direct_runner import direct_args

    options = PipelineOptions(direct_args("in_memory", 1))
    # Beam re-raises with the step named: a Stopped, not a RuntimeError
    with pytest.raises(stops.Stopped) as caught, beam.Pipeline(options=options) as pipeline:
        _ = pipeline | beam.Create([1]) | "StopHere" >> beam.Map(_stop)
    assert caught.value.signum == signal.SIGTERM
    assert str(caught.value).startswith("SIGTERM") and "StopHere" in str(caught.value)


def test_a_stop_names_its_signal():
    assert str(stops.Stopped(signal.SIGINT)) == "SIGINT" and stops.Stopped(signal.SIGINT).signum == signal.SIGINT
    assert stops.Stopped("SIGTERM [while running 'X']").signum == signal.SIGTERM
    with pytest.raises(KeyError):  # not a stop's message: Beam falls back to a RuntimeError, as for any other
        stops.Stopped("interrupted")


STUCK = """\
import sys, time
from tfxd import stops
with stops.handling(deadline=float(sys.argv[1])):
    ready = False
    while True:  # what a collective waiting on a peer that is gone looks like from here: the stop never lands
        try:
            if not ready:
                ready = True
                print("ready", flush=True)
            time.sleep(60)
        except stops.Stopped:
            print("stop raised, and swallowed", flush=True)
"""


@pytest.mark.reliability("crash point")
def test_a_process_that_does_not_stop_is_ended_at_its_deadline_with_the_signals_status(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "stuck.py"
    script.write_text(STUCK)
    process = subprocess.Popen([sys.executable, str(script), "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    # the deadline's watch ended it (its words name the deadline it was given), with the signal's status
    assert process.returncode == 143, err
    assert out == "stop raised, and swallowed\n"
    assert "tfxd: still running 2 s after SIGTERM (a step or a collective that does not return): ending now, " \
           "exit status 143" in err
    # without a deadline (a local run, whose cleanup may take its time) nothing ends the process for it
    assert stops.DEADLINE_SECONDS < stops.STOP_SECONDS < stops.GRACE_SECONDS


def test_how_a_process_ended_is_said_from_its_return_code():
    assert stops.ended(-9) == "was killed by signal 9 (SIGKILL: out of memory, or stopped from outside)"
    assert stops.ended(-15) == "was killed by signal 15 (SIGTERM)"
    assert stops.ended(1) == "exited with code 1"
