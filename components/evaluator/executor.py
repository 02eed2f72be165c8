"""Evaluator executor: TFX's, with an empty baseline taken for no baseline.

A resolver hands the Evaluator no baseline when there is none; a task that finds the baseline (the
open-source Kubeflow backend runs tasks, not resolvers: components/baseline) always hands over a model
artifact, empty when there is none. Given an empty one, TFX's Evaluator would try to load a model from
it; this executor leaves it out, so the first model is judged by its absolute thresholds alone, as it
is locally and on Vertex. Its examples are read a gzipped file at a time (tfxd.example_files), as
Transform's and StatisticsGen's are. The evaluation artifact carries its overall slice's metrics
(keys.METRICS_PROPERTY), which a run's record on a cluster hands to `tfxd history`; so does the blessing,
which hands them to Pusher, which writes them beside the pushed model.
"""

from __future__ import annotations

import json
import os

from absl import logging
from tensorflow_model_analysis.utils import model_util
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import path_utils

from tfxd import example_files, files, keys, patches
from tfxd.components.evaluator import result_files, signature_calls
from tfxd.components.evaluator.slices import metrics_per_slice
from tfxd.direct_runner import BeamMendedExecutor

BASELINE = standard_component_specs.BASELINE_MODEL_KEY


def has_model(model_uri: str) -> bool:
    """Whether a model artifact holds a model (an empty baseline does not)."""
    return fileio.exists(os.path.join(path_utils.serving_model_dir(model_uri), "saved_model.pb"))


class Executor(BeamMendedExecutor, files.PipelineTempRemovedExecutor, tfx_evaluator.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's shards
        baselines = input_dict.get(BASELINE) or []
        if baselines and not all(has_model(model.uri) for model in baselines):
            logging.info("tfxd evaluator: the baseline %s holds no model; evaluating without one",
                         [model.uri for model in baselines])
            input_dict = {key: value for key, value in input_dict.items() if key != BASELINE}
        with example_files.batched_reads(), \
                patches.applied_to_each("tfma.result_files", result_files.beam_for_tfma()), \
                patches.applied("tfma.signatures_by_name", signature_calls.get_callable(model_util.get_callable)):
            super().Do(input_dict, output_dict, exec_properties)
        evaluation = artifact_utils.get_single_instance(output_dict[standard_component_specs.EVALUATION_KEY])
        overall: dict[str, float] = next(
            (s["metrics"] for s in metrics_per_slice(evaluation.uri) if s["slice"] == keys.OVERALL_SLICE), {})
        blessing = artifact_utils.get_single_instance(output_dict[standard_component_specs.BLESSING_KEY])
        for artifact in (evaluation, blessing):  # the blessing hands them to Pusher (components/pusher)
            artifact.set_string_custom_property(keys.METRICS_PROPERTY, json.dumps(overall, sort_keys=True))
