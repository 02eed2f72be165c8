"""ExampleValidator executor: TFX's validation, then stop on anomalies when the spec asks for it."""

from __future__ import annotations

import json
import os

from absl import logging
from tfx.components.example_validator import executor as tfx_validator
from tfx.types import artifact_utils, standard_component_specs

FAIL_ON_ANOMALIES_KEY = "fail_on_anomalies"
GATED_COLUMNS_KEY = "gated_columns"


class AnomaliesFound(RuntimeError):
    """The data does not match the schema; the message lists each anomaly in plain words."""


def describe(anomalies, columns: set[str] | None = None) -> list[str]:
    """One line per anomaly: feature, kind, description (only ``columns``' when given)."""
    lines = []
    for feature, info in sorted(anomalies.anomaly_info.items()):
        if columns is not None and feature not in columns:
            continue
        kinds = ", ".join(sorted({reason.short_description for reason in info.reason})) or info.short_description
        details = "; ".join(reason.description for reason in info.reason) or info.description
        lines.append(f"feature {feature!r}: {kinds}: {details}")
    if anomalies.HasField("dataset_anomaly_info"):
        info = anomalies.dataset_anomaly_info
        lines.append(f"dataset: {info.short_description}: {info.description}")
    return lines


def read_anomalies(artifact, split: str):
    from tensorflow_metadata.proto.v0 import anomalies_pb2
    from tfx.utils import io_utils

    split_uri = artifact_utils.get_split_uri([artifact], split)
    path = io_utils.get_only_uri_in_dir(split_uri)
    return anomalies_pb2.Anomalies.FromString(io_utils.read_bytes_file(path))


class Executor(tfx_validator.Executor):
    def Do(self, input_dict, output_dict, exec_properties):  # noqa: N802 - TFX's name
        result = super().Do(input_dict, output_dict, exec_properties)
        if not exec_properties.get(FAIL_ON_ANOMALIES_KEY):
            return result
        artifact = artifact_utils.get_single_instance(output_dict[standard_component_specs.ANOMALIES_KEY])
        gated = json.loads(exec_properties.get(GATED_COLUMNS_KEY) or "null")
        columns = set(gated) if gated else None
        lines = []
        for split in artifact_utils.decode_split_names(artifact.split_names):
            anomalies = read_anomalies(artifact, split)
            lines += [f"split {split}: {line}" for line in describe(anomalies, columns)]
            if columns is not None:
                for line in describe(anomalies, set(anomalies.anomaly_info) - columns):
                    logging.warning("split %s: anomaly in a column the pipeline does not read: %s", split, line)
        if lines:
            raise AnomaliesFound(
                "the data does not match the schema:" + "".join(f"{os.linesep}  - {line}" for line in lines)
                + f"{os.linesep}Fix the data, update validation.schema, or set validation.fail_on_anomalies: false.")
        return result
