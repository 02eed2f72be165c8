"""The expression language compiled to TensorFlow agrees with numpy on the same values."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfxd.components.transform.expressions_tf import compile_expression

FARE = np.array([10.0, 0.0, np.nan, 25.5, 7.25])
MILES = np.array([2.0, 0.0, 1.0, np.nan, 3.5])
TIPS = np.array([3.0, 0.0, 1.0, 2.0, 0.0])
PAYMENT = np.array([b"Cash", b"Credit Card", b"", b"Cash", b"Unknown"])
COLUMNS = {"fare": tf.constant(FARE), "trip_miles": tf.constant(MILES), "tips": tf.constant(TIPS),
           "payment_type": tf.constant(PAYMENT)}


def run(text):
    return compile_expression(text, COLUMNS.__getitem__).numpy()


@pytest.mark.parametrize(("text", "expected"), [
    ("fare / (trip_miles + 1)", FARE / (MILES + 1)),
    ("tips > fare * 0.2", TIPS > FARE * 0.2),
    ("where(fare > 10, log(fare), sqrt(abs(fare - 1)))",
     np.where(FARE > 10, np.log(FARE), np.sqrt(np.abs(FARE - 1)))),
    ("max(fare, tips) - min(trip_miles, 1) + fare % 3", np.maximum(FARE, TIPS) - np.minimum(MILES, 1) + FARE % 3),
    ("not (payment_type == 'Cash') and tips >= 0", ~(PAYMENT == b"Cash") & (TIPS >= 0)),
    ("-exp(tips / 10)", -np.exp(TIPS / 10)),
])
def test_matches_numpy(text, expected):
    np.testing.assert_allclose(run(text), expected, rtol=1e-12, equal_nan=True)


def test_arithmetic_on_strings_is_refused():
    with pytest.raises(ValueError, match="arithmetic on a string column"):
        run("payment_type + 1")
