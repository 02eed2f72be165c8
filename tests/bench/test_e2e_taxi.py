"""The taxi bench's split of a run's seconds outside its components (bench/e2e_taxi.py, outside_split), read
from an ML Metadata store as a run leaves it: ML Metadata's own SQLite store, its times its own."""

from __future__ import annotations

import time

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tests.bench import bench_module

e2e_taxi = bench_module("e2e_taxi")


def _store(path: str) -> metadata_store.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    return metadata_store.MetadataStore(config)


def _executed(store: metadata_store.MetadataStore, type_id: int) -> metadata_store_pb2.Execution:
    """An execution registered, then published a moment later (two writes, as TFX's launcher makes)."""
    [execution_id] = store.put_executions([metadata_store_pb2.Execution(type_id=type_id)])
    time.sleep(0.01)
    [execution] = store.get_executions_by_id([execution_id])
    execution.last_known_state = metadata_store_pb2.Execution.COMPLETE
    store.put_executions([execution])
    [execution] = store.get_executions_by_id([execution_id])
    return execution


def test_a_runs_outside_seconds_split_before_between_and_after_its_components(tmp_path):
    path = str(tmp_path / "metadata.sqlite")
    store = _store(path)
    type_id = store.put_execution_type(metadata_store_pb2.ExecutionType(name="Component"))
    earlier = _executed(store, type_id)  # an earlier run's, in the same store
    time.sleep(0.05)
    first, second = _executed(store, type_id), _executed(store, type_id)
    started_at = (earlier.last_update_time_since_epoch + first.create_time_since_epoch) / 2000
    components = {"A": 0.25, "B": 0.5}
    seconds = second.last_update_time_since_epoch / 1000 + 0.4 - started_at  # the process ends 0.4 s after
    split = e2e_taxi.outside_split(path, {"started_at": started_at, "seconds": seconds, "components": components})
    start_up = round(first.create_time_since_epoch / 1000 - started_at, 3)
    assert split["start_up"] == start_up > 0  # from the run's own first execution, not the earlier run's
    assert split["end"] == 0.4
    assert abs(sum(split.values()) - (seconds - 0.75)) < 0.002  # the three make the run's outside seconds


def test_the_per_component_table_lists_the_split_where_every_run_has_one():
    def run(seconds: float, split: dict | None) -> dict:
        found = {"seconds": seconds, "components": {"Trainer": 1.0}}
        return found if split is None else {**found, "outside_split": split}

    split = {"start_up": 2.0, "between": 0.25, "end": 0.125}
    result = {"tfxd": [run(3.5, split)], "tfx": [run(9.0, split)], "tfx_control": [run(8.0, split)],
              "tfxd_seconds": {"median": 3.5}, "tfx_seconds": {"median": 9.0}, "tfx_control_seconds": {"median": 8.0}}
    text = e2e_taxi.details(result)
    assert "| ... before the first component (start-up, imports, the pipeline's assembly) | 2.00 | 2.00 | 2.00 |" in text
    assert "| ... after the last component (summary, report, exit) | 0.12 | 0.12 | 0.12 |" in text
    result["tfx"] = [run(9.0, None)]  # a run of the bench before the split
    assert "before the first component" not in e2e_taxi.details(result)
