"""Find the Evaluator's baseline in the push destination: the newest model there that is not the candidate.

The newest complete version there is the latest blessed model of the pipeline (tfxd.pushed), as
TFX's latest-blessed-model resolver finds it in ML Metadata; reading the destination needs no metadata
service address, the same on every Kubeflow installation and in `tfxd replay`. A version whose SavedModel is the candidate's own
(the same model pushed by an earlier run) is passed over, as locally (pipeline.assembly.baseline): a
model is never its own baseline.

The baseline is copied into this task's output model (its Format-Serving folder), which the Evaluator
reads; with none found the output stays empty and the Evaluator evaluates without a baseline.
"""

from __future__ import annotations

import hashlib
import os

from absl import logging
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from tfxd import files, pushed

CANDIDATE_KEY = "candidate"
MODEL_KEY = "model"
PUSH_DESTINATION_KEY = "push_destination"
SOURCE_PROPERTY = "tfxd_baseline_source"  # where the copied baseline was pushed, on the output model
_IDENTITY_FILES = ("fingerprint.pb", "saved_model.pb")  # TF writes fingerprint.pb since 2.12


def identity(saved_model_dir: str) -> str | None:
    """A digest of the SavedModel's own fingerprint file (or its graph): equal for a model and its copies."""
    for name in _IDENTITY_FILES:
        path = os.path.join(saved_model_dir, name)
        if fileio.exists(path):
            with fileio.open(path, "rb") as handle:
                return f"{name}:{hashlib.sha256(handle.read()).hexdigest()}"
    return None


class Executor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's copy
        given = input_dict.get(CANDIDATE_KEY)
        candidate = identity(path_utils.serving_model_path(artifact_utils.get_single_uri(given))) if given else None
        output = artifact_utils.get_single_instance(output_dict[MODEL_KEY])
        for version in pushed.versions(exec_properties[PUSH_DESTINATION_KEY]):
            if candidate is not None and identity(version) == candidate:
                logging.info("tfxd baseline: %s is the candidate itself, passed over", version)
                continue
            io_utils.copy_dir(version, path_utils.serving_model_dir(output.uri))
            output.set_string_custom_property(SOURCE_PROPERTY, version)
            logging.info("tfxd baseline: %s", version)
            return
        fileio.makedirs(output.uri)
        logging.info("tfxd baseline: no model pushed to %s yet (other than the candidate): none",
                     exec_properties[PUSH_DESTINATION_KEY])
