"""Process environment for TensorFlow, set before TensorFlow is imported.

TFX 1.16 needs Keras 2 (``tf_keras``); TF 2.16 defaults to Keras 3 and TFX's
Trainer then fails deep inside Keras. Every process tfxd starts imports this
module first (the package ``__init__`` files do), and child processes inherit
the variables.
"""

from __future__ import annotations

import os
import warnings


def configure(verbose: bool = False) -> None:
    """Select legacy Keras and, unless verbose, quiet TensorFlow's C++ logging (errors surface as
    Python exceptions anyway) and the Python-version nags of Google's client libraries."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.(api_core|cloud\.aiplatform)\..*")


configure(verbose=os.environ.get("TFXD_VERBOSE") == "1")
