"""What a local run did, read back from its ML Metadata store: each component's status and time,
and what ExampleGen reported (examples per split, bad records skipped)."""

from __future__ import annotations

import json
from typing import Any

from pipeline.assemble import metadata_path

_STATUS = {"COMPLETE": "ran", "CACHED": "cached", "FAILED": "failed", "RUNNING": "failed", "CANCELED": "failed"}


def _store(root: str):
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path(root)
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


def _latest_execution(store, pipeline: str, node_id: str, since: float):
    context = store.get_context_by_type_and_name("node", f"{pipeline}.{node_id}")
    if context is None:
        return None
    recent = [e for e in store.get_executions_by_context(context.id)
              if e.create_time_since_epoch >= int(since * 1000)]
    return max(recent, key=lambda e: (e.create_time_since_epoch, e.id)) if recent else None


def component_runs(root: str, pipeline: str, node_ids: list[str], since: float) -> list[dict[str, Any]]:
    """[{name, status: ran|cached|failed|not run, seconds}] for this run's components, in order."""
    from ml_metadata.proto import metadata_store_pb2

    store = _store(root)
    runs = []
    for node_id in node_ids:
        execution = _latest_execution(store, pipeline, node_id, since)
        if execution is None:
            runs.append({"name": node_id, "status": "not run", "seconds": 0.0})
            continue
        state = metadata_store_pb2.Execution.State.Name(execution.last_known_state)
        seconds = max(0, execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000
        runs.append({"name": node_id, "status": _STATUS.get(state, state.lower()), "seconds": round(seconds, 2)})
    return runs


def examples_report(root: str, pipeline: str) -> dict[str, Any]:
    """Split counts and bad-record counts of the newest ExampleGen output."""
    from components.example_gen.executor import BAD_RECORDS_PROPERTY, SPLIT_COUNTS_PROPERTY

    store = _store(root)
    context = store.get_context_by_type_and_name("node", f"{pipeline}.ExampleGen")
    if context is None:
        return {}
    artifacts = [a for a in store.get_artifacts_by_context(context.id)
                 if SPLIT_COUNTS_PROPERTY in a.custom_properties]
    if not artifacts:
        return {}
    newest = max(artifacts, key=lambda a: (a.create_time_since_epoch, a.id))
    bad = json.loads(newest.custom_properties[BAD_RECORDS_PROPERTY].string_value or "{}")
    return {"splits": json.loads(newest.custom_properties[SPLIT_COUNTS_PROPERTY].string_value),
            "bad_records": bad, "bad_records_total": sum(bad.values()), "uri": newest.uri}


def training_report(root: str, pipeline: str) -> dict[str, Any]:
    """The plan and final metrics the Trainer wrote next to its model in this run (cached runs included)."""
    import os

    store = _store(root)
    context = store.get_context_by_type_and_name("node", f"{pipeline}.Trainer")
    if context is None:
        return {}
    models = [a for a in store.get_artifacts_by_context(context.id) if a.type_id == _type_id(store, "Model")]
    if not models:
        return {}
    newest = max(models, key=lambda a: (a.create_time_since_epoch, a.id))
    path = os.path.join(newest.uri, "tfxd_training.json")
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        return json.load(handle)


def _type_id(store, name: str) -> int:
    return store.get_artifact_type(name).id
