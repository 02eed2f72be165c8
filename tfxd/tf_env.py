"""TensorFlow's environment in tfxd's processes: the variables set before TensorFlow (or pydantic) is
imported, and two settings made once it is, by the code that needs them.

TFX 1.16 needs Keras 2 (``tf_keras``); TF 2.16 defaults to Keras 3 and TFX's Trainer then fails deep
inside Keras. ``tfxd/__init__.py`` calls ``configure``, so every process that imports any tfxd module has
the variables set first, and child processes inherit them. ``leave_graph_libraries_to_themselves`` (a run,
before its components) and ``graphs_built_plainly`` (around the Trainer's training) act on TensorFlow
itself once it is imported.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from tfxd import patches

VERBOSE_ENV = "TFXD_VERBOSE"  # "1": `tfxd -v`, inherited by the processes tfxd starts
# TensorFlow's GCS filesystem reads a file through a buffer of this many MB, zero-filled at its first read
# (tsl/platform/cloud/gcs_file_system.cc: BufferedGcsRandomAccessFile::FillBuffer resizes its buffer to the
# block size, 64 MB by default) and held while the file is open: 64 MB of memory and some 40 ms of a core
# for every small file a task reads from a bucket (a schema, a record, a model's variables). 8 MB still reads
# a large shard in few requests (a 1 GB one in 128), as Google's own Vertex AI training samples set it for the
# memory; a user's own value is kept.
GCS_READ_BLOCK_ENV, GCS_READ_BLOCK_MB = "GCS_READ_CACHE_BLOCK_SIZE_MB", "8"


def configure(verbose: bool | None = None) -> None:
    """Select legacy Keras and TensorFlow's GCS read buffer (GCS_READ_BLOCK_MB) and, unless verbose
    (default: as VERBOSE_ENV says), quiet TensorFlow's C++ logging (errors surface as Python exceptions
    anyway) and the Python-version nags of Google's client libraries."""
    if verbose is None:
        verbose = os.environ.get(VERBOSE_ENV) == "1"
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    os.environ.setdefault(GCS_READ_BLOCK_ENV, GCS_READ_BLOCK_MB)
    # pydantic looks up third-party plugins through package metadata on first use (tens of milliseconds of
    # a `tfxd validate` that answers in well under half a second); tfxd's spec models use none
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.(api_core|cloud\.aiplatform)\..*")


# Libraries whose own code runs in graph mode as written, which AutoGraph has no rule for: it would
# transpile them on their first call inside a tf.function (patch tensorflow.graph_libraries_left_alone).
# tf_keras is the `keras` package's Keras 2 under TF_USE_LEGACY_KERAS=1; tf.Transform traces its own
# graphs with autograph=False (impl_helper.get_traced_transform_fn, saved_transform_io_v2's transform
# function). The Trainer's export signatures' ops and outputs are the same either way.
LEFT_TO_THEMSELVES = ("tf_keras", "tensorflow_transform")


def leave_graph_libraries_to_themselves() -> None:
    """AutoGraph leaves the libraries of LEFT_TO_THEMSELVES alone, as it leaves the `keras` and
    `tensorflow` packages; a user's own layers and functions are converted as before. Imports
    TensorFlow: call it where TensorFlow is about to run."""
    from tensorflow.python.autograph.core import config, config_lib

    missing = [name for name in LEFT_TO_THEMSELVES
               if not any(isinstance(rule, config_lib.DoNotConvert) and rule.matches(name)
                          for rule in config.CONVERSION_RULES)]
    patches.assigned("tensorflow.graph_libraries_left_alone",
                     (*(config_lib.DoNotConvert(name) for name in missing), *config.CONVERSION_RULES))


@contextlib.contextmanager
def graphs_built_plainly() -> Iterator[None]:
    """In the block, TensorFlow adds ops to a graph without two per-call costs of its API decorators
    (patches tensorflow.closures_undecorated and tensorflow.create_op_unchecked): a context manager made
    inside a function at each call (FuncGraph.as_default's, ops.device's) is contextlib's own, without
    TensorFlow's introspection metadata, which nothing reads on an object used once; Graph.create_op is
    its own method, without the deprecation check of its ignored ``compute_shapes`` argument (that
    argument's warning is not logged meanwhile). The graphs are the same. Imports TensorFlow."""
    from tensorflow.python.framework import (
        ops,  # start-up: TensorFlow loads where it is about to run
    )
    from tensorflow.python.util import tf_contextlib, tf_decorator

    unchecked = tf_decorator.unwrap(ops.Graph.create_op)[1]
    with (patches.applied("tensorflow.closures_undecorated", _closures_undecorated(tf_contextlib.contextmanager)),
          patches.applied("tensorflow.create_op_unchecked", unchecked)):
        yield


def _closures_undecorated(decorating: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """tf_contextlib.contextmanager (``decorating``), except for a function defined inside another (its
    qualified name says ``<locals>``): made at each call of that function, it gets contextlib's context
    manager, which tf_contextlib wraps."""

    def contextmanager(target: Any) -> Any:
        if "<locals>" in getattr(target, "__qualname__", ""):
            return contextlib.contextmanager(target)
        return decorating(target)

    return contextmanager
