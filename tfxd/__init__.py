"""tfxd: one YAML file -> a TFX pipeline that runs locally, on Kubeflow and on Vertex AI.

This folder is the ground floor of the house, the few modules every other floor may use (the
TensorFlow environment, the console, atomic files, the expression language, and the tables of
names, metrics and transforms that cross rooms), and the root of the import name: the repository's
top-level folders are its subpackages (``tfxd.cli`` is cli/, ``tfxd.pipeline`` is pipeline/, ...;
pyproject.toml maps them, for the wheel and for editable installs alike). docs/design.md has
the map of the floors.

Every process tfxd starts imports a ``tfxd`` module, so this file is the one place that prepares
TensorFlow's environment, before anything imports TensorFlow, and defers Beam's Google Cloud connectors,
TFX's components package's own imports and TFMA's Rouge metric (tfxd.deferred_imports), and work two
libraries do at their import (tfxd.deferred_work), before anything imports them.
"""

from tfxd import deferred_imports, deferred_work, tf_env

tf_env.configure()
deferred_imports.install()
deferred_work.install()
