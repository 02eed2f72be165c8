"""Custom TFX components of tfxd: one package per component."""

from pipeline import tf_env  # noqa: F401  (must run before anything imports TensorFlow)
