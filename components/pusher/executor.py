"""Pusher executor: TFX's, then the evaluation that blessed the model written beside the pushed version
(tfxd.pushed.EVALUATION_FILE, in the SavedModel's assets.extra, which TF Serving ignores): with the data
record and the training report the Trainer left there, a version on the serving path says what it was trained
on, how and how it scored, after the pipeline root's runs are gone. Written after saved_model.pb, as the
version is complete before it; a reader takes its absence as nothing said."""

from __future__ import annotations

import json
import os

from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs

from tfxd import files, keys, pushed


class Executor(tfx_pusher.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's copy of the model
        super().Do(input_dict, output_dict, exec_properties)
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if model_push.get_int_custom_property("pushed") != 1:
            return
        blessing = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_BLESSING_KEY])
        destination = model_push.get_string_custom_property("pushed_destination")
        evaluation = {"blessed": True, "metrics": json.loads(blessing.get_string_custom_property(keys.METRICS_PROPERTY)
                                                             or "{}"),
                      "model": blessing.get_string_custom_property("current_model") or None,
                      "baseline": blessing.get_string_custom_property("baseline_model") or None,
                      "pushed_model": model_push.uri}
        fileio.makedirs(os.path.join(destination, pushed.EXTRA_DIR))
        files.write_atomic(os.path.join(destination, pushed.EVALUATION_FILE), json.dumps(evaluation, indent=2, sort_keys=True))
