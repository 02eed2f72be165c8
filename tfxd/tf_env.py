"""Process environment for TensorFlow (and pydantic), set before either is imported.

TFX 1.16 needs Keras 2 (``tf_keras``); TF 2.16 defaults to Keras 3 and TFX's
Trainer then fails deep inside Keras. ``tfxd/__init__.py`` calls ``configure``,
so every process that imports any tfxd module has it done first, and child
processes inherit the variables.
"""

from __future__ import annotations

import os
import warnings

VERBOSE_ENV = "TFXD_VERBOSE"  # "1": `tfxd -v`, inherited by the processes tfxd starts


def configure(verbose: bool | None = None) -> None:
    """Select legacy Keras and, unless verbose (default: as VERBOSE_ENV says), quiet TensorFlow's C++
    logging (errors surface as Python exceptions anyway) and the Python-version nags of Google's
    client libraries."""
    if verbose is None:
        verbose = os.environ.get(VERBOSE_ENV) == "1"
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    # pydantic looks up third-party plugins through package metadata on first use (~40 ms of a
    # sub-half-second `tfxd validate`); tfxd's spec models use none
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.(api_core|cloud\.aiplatform)\..*")


def leave_tf_keras_to_itself() -> None:
    """AutoGraph does not convert the `keras` package (Keras 2's own code is written for graph mode) but
    has no such rule for `tf_keras`, the same Keras 2 under TF_USE_LEGACY_KERAS=1, so every fit and every
    Keras metric in TFMA transpiled Keras' train step, losses, metrics and layers: 15 of the taxi
    Trainer's 17 s first epoch (py-spy). The same rule for tf_keras; a user's own layers and functions
    are converted as before. Imports TensorFlow: call it where TensorFlow is about to run."""
    from tensorflow.python.autograph.core import config, config_lib

    if not any(isinstance(rule, config_lib.DoNotConvert) and rule.matches("tf_keras")
               for rule in config.CONVERSION_RULES):
        config.CONVERSION_RULES = (config_lib.DoNotConvert("tf_keras"), *config.CONVERSION_RULES)
