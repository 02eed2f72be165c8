"""ExampleValidator executor: TFX's validation, then stop on anomalies when the spec asks for it."""

from __future__ import annotations

import json
import os

import tensorflow_data_validation as tfdv
from absl import logging
from tfx.components.example_validator import executor as tfx_validator
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from tfxd import files, keys
from tfxd.components.example_validator import classes, drift

FAIL_ON_ANOMALIES_KEY = "fail_on_anomalies"
GATED_COLUMNS_KEY = "gated_columns"
DRIFT_KEY = "drift"
SKEW_KEY = "skew"
LABEL_KEY = "label"  # a multiclass label: {column, num_classes} (classes.py)
GATE_PROPERTIES = {"drift": keys.DRIFT_PROPERTY, "skew": keys.SKEW_PROPERTY}
EXAMPLES_KEY = "examples"


class AnomaliesFound(RuntimeError):
    """The data does not match the schema; the message lists each anomaly in plain words."""


class GateStopped(RuntimeError):
    """A validation gate stopped the run; ``verdict`` ({gate, message, and the gate's record}) goes into a
    cluster task's record (components/cluster_task.py), as the log line keys.GATE_VERDICT does locally."""

    def __init__(self, message: str, verdict: dict) -> None:
        super().__init__(message)
        self.verdict = verdict


class DriftFound(GateStopped):
    """The new span's distribution moved beyond validation.drift's thresholds; names columns and numbers."""


class LabelClassesWrong(RuntimeError):
    """A multiclass label's classes do not fit the spec or the splits; names the values, splits and fix."""


class SkewFound(GateStopped):
    """The train and eval splits differ beyond validation.skew's thresholds; names columns and numbers."""


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
        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's files
        result = super().Do(input_dict, output_dict, exec_properties)
        label = json.loads(exec_properties.get(LABEL_KEY) or "null")
        if label:
            self._check_classes(input_dict, label)
        if exec_properties.get(FAIL_ON_ANOMALIES_KEY):
            self._gate_anomalies(output_dict, exec_properties)
        drift_config = json.loads(exec_properties.get(DRIFT_KEY) or "null")
        if drift_config and input_dict.get(EXAMPLES_KEY):
            self._gate_drift(input_dict, output_dict, exec_properties, drift_config)
        skew_config = json.loads(exec_properties.get(SKEW_KEY) or "null")
        if skew_config:
            self._gate_skew(input_dict, output_dict, exec_properties, skew_config)
        if (drift_config or skew_config) and result is not None:
            # TFX's executor returns a copy of its output: publish the gates' records too
            published = result.output_artifacts[standard_component_specs.ANOMALIES_KEY].artifacts
            published[0].CopyFrom(artifact_utils.get_single_instance(
                output_dict[standard_component_specs.ANOMALIES_KEY]).mlmd_artifact)
        return result

    def _check_classes(self, input_dict, label) -> None:
        statistics = artifact_utils.get_single_instance(input_dict[standard_component_specs.STATISTICS_KEY])
        by_split = {}
        for split in artifact_utils.decode_split_names(statistics.split_names):
            path = os.path.join(artifact_utils.get_split_uri([statistics], split), drift.STATISTICS_FILE)
            found = classes.classes(tfdv.load_stats_binary(path), label["column"])
            if found is not None:
                by_split[split] = found
        if by_split and not classes.complete(by_split):  # the statistics list only part of the classes
            examples = input_dict.get(EXAMPLES_KEY)
            if examples:
                by_split = classes.from_examples(artifact_utils.get_single_instance(examples), label["column"])
            else:
                logging.warning("tfxd ExampleValidator: the statistics list only part of the classes of label "
                                "column %r and no examples were given to count them in: the classes of the eval "
                                "split are not compared with train's", label["column"])
        wrong = classes.problems(label, by_split)
        if wrong:
            raise LabelClassesWrong("; ".join(wrong))

    def _gate_skew(self, input_dict, output_dict, exec_properties, config) -> None:
        statistics = artifact_utils.get_single_instance(input_dict[standard_component_specs.STATISTICS_KEY])
        train, evaluation = (tfdv.load_stats_binary(os.path.join(artifact_utils.get_split_uri([statistics], split),
                                                                 drift.STATISTICS_FILE))
                             for split in (drift.TRAIN, drift.EVAL))
        columns = drift.distances(train, evaluation, self._schema(input_dict), config["threshold"], config["features"],
                                  self._gated(exec_properties), skew=True)
        record = {"columns": columns, "beyond": drift.beyond(columns)}
        _judge(output_dict, "skew", record, config, SkewFound,
               f"the train and eval splits differ: {_moved(record['beyond'])}",
               "Check how the splits are made (file-pattern splits from other sources or periods); if the "
               "difference is expected")

    @staticmethod
    def _schema(input_dict):
        schema_dir = artifact_utils.get_single_uri(input_dict[standard_component_specs.SCHEMA_KEY])
        return io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema_dir))

    @staticmethod
    def _gated(exec_properties) -> set[str] | None:
        """The columns the pipeline reads (None: every column, with a user preprocessing_fn)."""
        return set(json.loads(exec_properties.get(GATED_COLUMNS_KEY) or "null") or []) or None

    def _gate_drift(self, input_dict, output_dict, exec_properties, config) -> None:
        examples = artifact_utils.get_single_instance(input_dict[EXAMPLES_KEY])
        spans = json.loads(examples.get_string_custom_property(keys.SPANS_PROPERTY) or "[]")
        if not spans:
            return
        newest = str(spans[-1])
        judged = json.loads(examples.get_string_custom_property(keys.DRIFT_SPANS_PROPERTY) or "null")
        # ExampleGen named the span before the newest read (examples from before it did: what the store has)
        previous = judged["previous"] if judged else drift.previous_span(config["store"], newest)
        statistics = artifact_utils.get_single_instance(input_dict[standard_component_specs.STATISTICS_KEY])
        current_path = (os.path.join(artifact_utils.get_split_uri([statistics], drift.TRAIN), drift.STATISTICS_FILE)
                        if len(spans) == 1 else drift.span_statistics(config["store"], examples, newest))
        previous_path = drift.span_statistics(config["store"], examples, previous) if previous else None
        record: dict = {"span": newest, "previous_span": previous, "columns": {}, "beyond": {}}
        if current_path is None or (previous is not None and previous_path is None):
            missing = newest if current_path is None else previous
            logging.warning("tfxd drift: no statistics of span %s in %s and no examples of it to compute them "
                            "from: nothing to compare", missing, config["store"])
            record["previous_span"] = None
        elif previous_path is None:
            logging.info("tfxd drift: no span before %s: nothing to compare with", newest)
        else:
            record["columns"] = drift.distances(
                tfdv.load_stats_binary(current_path), tfdv.load_stats_binary(previous_path),
                self._schema(input_dict), config["threshold"], config["features"], self._gated(exec_properties))
            record["beyond"] = drift.beyond(record["columns"])
        _judge(output_dict, "drift", record, config, DriftFound,
               f"the data drifted between span {previous} and span {newest}: {_moved(record['beyond'])}",
               "Check the new span's data; if the change is real")
        if len(spans) == 1 and current_path is not None:  # StatisticsGen's; a window's newest is kept already
            drift.keep(config["store"], newest, current_path)

    def _gate_anomalies(self, output_dict, exec_properties) -> None:
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


def _moved(beyond: dict) -> str:
    """The columns past their threshold, in words: `fare: Jensen-Shannon distance 0.9457 > threshold 0.2`."""
    return "; ".join(f"{column}: {value['measure']} distance {value['distance']:.4f} > threshold "
                     f"{value['threshold']:g}" for column, value in sorted(beyond.items()))


def _judge(output_dict, gate: str, record: dict, config: dict, error: type[GateStopped], text: str,
           check: str) -> None:
    """Record a gate's distances on the anomalies artifact, then stop the run or warn when a column is
    beyond its threshold (validation.<gate>.action)."""
    artifact = artifact_utils.get_single_instance(output_dict[standard_component_specs.ANOMALIES_KEY])
    artifact.set_string_custom_property(GATE_PROPERTIES[gate], json.dumps(record, sort_keys=True))
    if not record["beyond"]:
        return
    if config["action"] == "fail":
        verdict = {"gate": gate, "message": text, **record}
        logging.error("%s%s", keys.GATE_VERDICT, json.dumps(verdict, sort_keys=True))
        raise error(f"{text}. {check}, raise the threshold (validation.{gate}.features) or set "
                    f"validation.{gate}.action: warn", verdict)
    logging.warning("tfxd %s: %s (validation.%s.action: warn)", gate, text, gate)
