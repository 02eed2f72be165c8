"""Which spans, and which of their files, one ExampleGen run reads, and whether they are new: decided once,
before anything is read.

TFX's own ExampleGen driver resolves the span and fingerprints the input before the cache is asked, so
that the cache key holds the data. tfxd reads spans its own way (a window, a given day, the scheduled
day; tfxd.spans), so its driver (driver.py) decides here, on the local runners, and hands the decision
on as execution properties: the cache key then holds the spans read, their files and a fingerprint of
them (sizes and modification times, as TFX's), and nothing that changes from run to run (the time a
local run started is read as its day). Where no tfxd driver runs (Kubeflow runs none; Vertex runs TFX's
own; replay runs what the file says), the executor decides the same way before reading.

"No new data" is decided here too: the spans to read are the ones the latest blessed model was trained
on. With `data.on_no_new_data: skip` ExampleGen then reads nothing and says so on its examples
(keys.NEW_DATA_PROPERTY = 0 and the reason), and the pipeline's condition (pipeline/assembly/dag.py)
skips every component after it: the run ends successfully, on every runner. So is which spans the drift
gate compares, and which of them ExampleGen writes train examples of for it (components/example_validator/
drift.py).
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any

from absl import logging
from tfx.components.example_gen import utils as example_gen_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from tfxd import keys, pushed, reader_config, spans
from tfxd.components.example_gen.records import InputError
from tfxd.reader_config import SpanReading

FILES_KEY = "_tfxd_files"  # JSON {split ("" for ratio splits): the chosen spans' files}
DECISION_KEY = "_tfxd_spans_read"  # JSON {spans, day, no_new_data, drift}: set once the spans are decided


class NoNewDataFound(InputError):
    """The spans to read are the ones the latest blessed model was trained on, and the spec says fail."""


def decided(exec_properties: dict[str, Any]) -> bool:
    return bool(exec_properties.get(DECISION_KEY))


def decide(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """``exec_properties`` with the decision made (the spans, their files, span, version, fingerprint),
    for a reader config with spans; unchanged otherwise. InputError when the spans cannot be read."""
    config = reader_config.of(exec_properties).spans
    if not config or decided(exec_properties):
        return exec_properties
    pattern = spans.SpanPattern.parse(config.placed()[0])
    choice, day = config.choice, None
    override = (exec_properties.get(keys.SPAN_KEY) or "").strip()
    try:
        if override:
            choice = {"span": pattern.span_of(override)}
        elif isinstance(choice, dict) and "scheduled" in choice:
            day = _scheduled_day(exec_properties, choice, config)
            choice = {"span": spans.date_span(day.day)}
        present = pattern.find(fileio.glob)
        chosen = spans.select(pattern, present, choice)
        input_config = example_gen_pb2.Input()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
        user_patterns = config.splits  # file-pattern splits: each reads its own files
        files = {split.name if user_patterns else "": pattern.files_of(
            chosen, [user_patterns[split.name]] if user_patterns else [], fileio.glob, fileio.isdir)
            for split in input_config.splits}
        drift = _drift(config, pattern, present, chosen)
    except spans.SpanError as exc:
        raise InputError(str(exc)) from None
    labels = [pattern.label(found.span) for found in chosen]
    logging.info("tfxd ExampleGen: spans %s%s", ", ".join(map(str, labels)),
                 f" ({day.day}: {day.why})" if day else "")
    decision = {"spans": labels, "day": day and {"day": day.day.isoformat(), "why": day.why},
                "no_new_data": _no_new_data(config, labels), "drift": drift}
    return {**exec_properties, FILES_KEY: json.dumps(files, sort_keys=True),
            DECISION_KEY: json.dumps(decision, sort_keys=True),
            keys.SCHEDULE_TIME_KEY: "", keys.CREATE_TIME_KEY: "",  # read: the decision holds the day they gave
            example_gen_utils.SPAN_PROPERTY_NAME: chosen[-1].span,  # the newest span read
            example_gen_utils.VERSION_PROPERTY_NAME: chosen[-1].version,
            example_gen_utils.FINGERPRINT_PROPERTY_NAME: fingerprint(files)}


def decision(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """The decision made by decide(): {spans, day: {day, why} | None, no_new_data: reason | None}."""
    return json.loads(exec_properties[DECISION_KEY])


def _drift(config: SpanReading, pattern: spans.SpanPattern, present: list[spans.Found],
           chosen: list[spans.Found]) -> dict[str, Any] | None:
    """With validation.drift (the reader's ``drift_store``): the span the gate judges (the newest read),
    the span it compares with (the newest present before it, whether an earlier run read it or not), and,
    for each of the two whose train statistics the store lacks, its train files, which the executor turns
    into that span's train examples (keys.DRIFT_EXAMPLES_DIR). A run that read the newest span alone has
    its statistics already: StatisticsGen's."""
    store = config.drift_store
    if not store:
        return None
    newest = chosen[-1]
    older = [found for found in spans.newest_versions(present) if found.span < newest.span]
    previous = older[-1] if older else None
    train = [config.splits["train"]] if config.splits else []
    examples = {}
    for found in (previous, None if len(chosen) == 1 else newest):
        label = found and str(pattern.label(found.span))
        if found and label and not fileio.exists(os.path.join(store, label, keys.DRIFT_STATISTICS_FILE)):
            examples[label] = pattern.files_of([found], train, fileio.glob, fileio.isdir)
    return {"newest": str(pattern.label(newest.span)),
            "previous": previous and str(pattern.label(previous.span)), "examples": examples}


def drift_examples(exec_properties: dict[str, Any]) -> dict[str, list[str]]:
    """{span: its train files} the executor writes train examples of for the drift gate ({} for none)."""
    if not decided(exec_properties):
        return {}
    return (decision(exec_properties).get("drift") or {}).get("examples", {})


def _scheduled_day(exec_properties: dict[str, Any], choice: dict[str, Any], config: SpanReading):
    local_start = datetime.datetime.now(datetime.timezone.utc) if config.local else None
    return spans.scheduled_day(exec_properties.get(keys.SCHEDULE_TIME_KEY) or "", choice["scheduled"],
                               unscheduled=choice.get("unscheduled", "fail"),
                               create_time=exec_properties.get(keys.CREATE_TIME_KEY) or "", local_start=local_start)


def fingerprint(files: dict[str, list[str]]) -> str:
    """The chosen files as TFX's driver fingerprints an input (io_utils.generate_fingerprint: count, bytes,
    and modification times to the second, order-free), split by split: a file rewritten in place changes
    it, as does one added to or removed from a span."""
    parts = []
    for split in sorted(files):
        total = xor = added = 0
        for path in files[split]:
            stat = fileio.stat(path)
            seconds = int(stat.mtime_nsec // 10**9)
            total, xor, added = total + stat.length, xor ^ seconds, added + seconds
        parts.append(f"split:{split or 'single_split'},num_files:{len(files[split])},total_bytes:{total},"
                     f"xor_checksum:{xor},sum_checksum:{added}")
    return "\n".join(parts)


def _no_new_data(config: SpanReading, labels: list[Any]) -> str | None:
    """The reason there is nothing new to train on, or None: the spans are the ones the newest pushed model
    (the latest blessed one, tfxd.pushed) was trained on. A model that recorded no spans compares with
    nothing; `on_no_new_data: train` never compares."""
    if config.on_no_new_data == "train":
        return None
    latest = next(iter(pushed.versions(config.placed()[1])), None)
    if latest is None or pushed.data_record(latest).spans != labels:
        return None
    return (f"no new data: the spans to read ({', '.join(map(str, labels))}) are the ones the latest blessed "
            f"model ({latest}) was trained on")


def stamp(examples, exec_properties: dict[str, Any]) -> None:
    """The decision on the examples artifact: the spans read, the day and why, whether they are new."""
    made = decision(exec_properties)
    examples.span = exec_properties[example_gen_utils.SPAN_PROPERTY_NAME]
    if exec_properties.get(example_gen_utils.VERSION_PROPERTY_NAME) is not None:
        examples.version = exec_properties[example_gen_utils.VERSION_PROPERTY_NAME]
    examples.set_string_custom_property(example_gen_utils.FINGERPRINT_PROPERTY_NAME,
                                        exec_properties[example_gen_utils.FINGERPRINT_PROPERTY_NAME])
    examples.set_string_custom_property(keys.SPANS_PROPERTY, json.dumps(made["spans"]))
    if made["day"]:
        examples.set_string_custom_property(keys.SPAN_DAY_PROPERTY, json.dumps(made["day"], sort_keys=True))
    if made.get("drift"):
        examples.set_string_custom_property(keys.DRIFT_SPANS_PROPERTY, json.dumps(
            {"newest": made["drift"]["newest"], "previous": made["drift"]["previous"]}, sort_keys=True))
    examples.set_int_custom_property(keys.NEW_DATA_PROPERTY, 0 if made["no_new_data"] else 1)
    if made["no_new_data"]:
        examples.set_string_custom_property(keys.NO_NEW_DATA_PROPERTY, made["no_new_data"])


def refuse_or_skip(exec_properties: dict[str, Any]) -> str | None:
    """With no new data: NoNewDataFound under `on_no_new_data: fail`, else the reason (nothing to read)."""
    reason = decision(exec_properties)["no_new_data"]
    spans_read = reader_config.of(exec_properties).spans
    if reason and spans_read is not None and spans_read.on_no_new_data == "fail":
        raise NoNewDataFound(f"{reason}; data.on_no_new_data is fail")
    return reason
