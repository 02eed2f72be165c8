"""tfxd's spec, its loading, the CLI and (later) the spec -> TFX pipeline assembly."""
from pipeline import tf_env  # noqa: F401  (must run before anything imports TensorFlow)
