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

    options = PipelineOptions(["--direct_running_mode=in_memory"])
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
