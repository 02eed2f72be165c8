"""Kubeflow Pipelines and Vertex AI: compile, submit, schedule, replay."""

from pipeline import tf_env  # noqa: F401  (must run before anything imports TensorFlow)
