"""Run tfxd's ExampleGen executor in-process on a spec written by the test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

TFX_DIR = Path(__import__("importlib.util").util.find_spec("tfx").submodule_search_locations[0])
EXTERNAL = TFX_DIR / "components" / "testdata" / "external"
# The parquet copy's column types; pinned so every format encodes the same tf.Examples.
PARQUET_TYPES = {
    "pickup_community_area": "int", "fare": "float", "trip_start_month": "int", "trip_start_hour": "int",
    "trip_start_day": "int", "trip_start_timestamp": "int", "pickup_latitude": "float",
    "pickup_longitude": "float", "dropoff_latitude": "float", "dropoff_longitude": "float", "trip_miles": "float",
    "pickup_census_tract": "float", "dropoff_census_tract": "float", "payment_type": "string",
    "company": "string", "trip_seconds": "float", "dropoff_community_area": "float", "tips": "float",
}


def spec_text(data: dict) -> str:
    return json.dumps({
        "tfxd": 1, "name": "eg-test", "data": data,
        "features": [{"name": "fare", "transform": "zscore"}],
        "label": {"name": "big_tipper", "expr": "tips > fare * 0.2", "task": "binary"},
    })


def example_gen_outputs(work: Path, data: dict, beam_args: list[str] | None = None, folder: Path | None = None):
    """tfxd's ExampleGen on ``data`` (a data section), its outputs in a new out-N folder of ``work``:
    ({split: [serialized examples, canonical and sorted]}, the artifact)."""
    import tensorflow as tf
    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
    from tfx.types import artifact_utils, standard_artifacts

    from tfxd.components.example_gen import executor
    from tfxd.direct_runner import direct_args
    from tfxd.pipeline.assembly.dag import nodes
    from tfxd.pipeline.spec.load import load_spec

    folder = folder or work
    spec = folder / "spec.yaml"
    spec.write_text(spec_text(data))
    example_gen = nodes(load_spec(str(spec), check_files=False), to="ExampleGen")[0]
    properties = dict(example_gen.exec_properties)
    out = work / f"out-{len(list(work.glob('out-*')))}"
    examples = standard_artifacts.Examples()
    examples.uri = str(out / "examples")
    context = BaseBeamExecutor.Context(beam_pipeline_args=beam_args or direct_args("in_memory", 1),
                                       tmp_dir=str(out / "tmp"), unique_id="1")
    executor.Executor(context).Do({}, {"examples": [examples]}, properties)
    splits = {}
    for name in artifact_utils.decode_split_names(examples.split_names):
        files = tf.io.gfile.glob(os.path.join(examples.uri, f"Split-{name}", "*"))
        # read by TensorFlow in batches: a record at a time through as_numpy_iterator took ~150 us each
        records = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096)
        # canonical bytes: map order in a serialized tf.Example may vary between processes
        splits[name] = sorted(tf.train.Example.FromString(record).SerializeToString(deterministic=True)
                              for batch in records.as_numpy_iterator() for record in batch)
    return splits, examples


@pytest.fixture
def run_example_gen(tmp_path):
    """(data section, beam args, folder) -> ({split: [serialized examples]}, artifact), in the test's folder."""

    def run(data: dict, beam_args: list[str] | None = None, folder: Path | None = None):
        return example_gen_outputs(tmp_path, data, beam_args, folder)

    return run
