"""What runs inside the Trainer: run_fn, strategy planner, input pipeline, models."""

from pipeline import tf_env  # noqa: F401  (must run before anything imports TensorFlow)
