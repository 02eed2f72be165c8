"""The cluster's agreement check after training (run_fn._check_agreement): the gathered checksums of
every replica decide between 'hold the same weights' and a warning naming the checksums. The real
collective path runs in tests/kubeflow/test_operator_replay.py (two worker processes); here a
distribution whose replicas disagree shows the warning biting."""

from __future__ import annotations

import logging

from tfxd.trainer_module import run_fn


class _Replicas:
    """A distribution of two replicas whose gathered checksums are ``values``."""

    num_replicas_in_sync = 2

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def run(self, fn):
        return fn()

    def gather(self, value, axis):
        import tensorflow as tf

        return tf.constant(self.values, tf.float64)


def test_replicas_that_disagree_are_named_in_a_warning(caplog):
    with caplog.at_level(logging.INFO, logger="absl"):  # quiet runs before may have set absl to WARNING
        run_fn._check_agreement(_Replicas([1.5, 2.25]), 1.5)
    assert "the replicas ended with different weights (checksums 1.5, 2.25)" in caplog.text


def test_replicas_that_agree_say_so(caplog):
    with caplog.at_level(logging.INFO, logger="absl"):  # quiet runs before may have set absl to WARNING
        run_fn._check_agreement(_Replicas([1.5, 1.5]), 1.5)
    assert "all 2 replicas hold the same weights" in caplog.text and "different" not in caplog.text
