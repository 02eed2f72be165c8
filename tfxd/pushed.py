"""The push destination as the record of blessed models: Pusher pushes a model only when the Evaluator
blessed it, each into `<destination>/<unix time>/` (saved_model.pb written last), so the newest complete
version there is the pipeline's latest blessed model on every runner, with nothing but the bucket the
pipeline already writes. Beside each model, in its SavedModel's assets.extra (copied with it, ignored by
TF Serving), the Trainer leaves what it was trained on: the Evaluator's baseline (components/baseline),
ExampleGen's "no new data" check and the Trainer's warm start read them here. The Trainer's training report
(its plan, epochs and metrics) lies there too, and tfxd's Pusher adds the evaluation that blessed the model
(EVALUATION_FILE): a pushed version says where it came from even where the pipeline root is gone, and
`tfxd history` reads it (pipeline/run/cluster_history.py)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from tfxd.files import file_reader, join

# inside the serving model's folder: DataRecord as JSON; the chief's run_fn writes it
DATA_RECORD_FILE = os.path.join("assets.extra", "tfxd_data.json")
# inside the serving model's folder: the training report (training_report.write, the chief's run_fn) and the
# evaluation that blessed the pushed version ({blessed, metrics, model, baseline}, components/pusher)
EXTRA_DIR = "assets.extra"
EVALUATION_FILE = os.path.join(EXTRA_DIR, "tfxd_evaluation.json")


@dataclass(frozen=True)
class DataRecord:
    """What a model was trained on: ``inputs``, what its weights depend on (trainer_module/warm_start.py:
    inputs_record); ``spans``, the spans it read, with spans in data.path (keys.TrainerConfig.SPANS)."""

    inputs: dict[str, Any] = field(default_factory=dict)
    spans: list[Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"inputs": self.inputs, **({"spans": self.spans} if self.spans is not None else {})}


def versions(destination: str) -> list[str]:
    """The complete pushed models under ``destination``, newest first."""
    reader = file_reader(destination)
    if not reader.exists(destination):
        return []
    names = [name.rstrip("/") for name in reader.listdir(destination)]
    numbered = sorted((name for name in names if name.isdigit()), key=int, reverse=True)
    return [join(destination, name) for name in numbered
            if reader.exists(join(destination, name, "saved_model.pb"))]


def data_record(serving_model_dir: str) -> DataRecord:
    """What the model at ``serving_model_dir`` was trained on (an empty record when it says nothing)."""
    found = read_json(serving_model_dir, DATA_RECORD_FILE)
    return DataRecord(found.get("inputs") or {}, found.get("spans"))


def write_data_record(serving_model_dir: str, record: DataRecord) -> None:
    from tfx.dsl.io import fileio  # start-up: as above

    path = os.path.join(serving_model_dir, DATA_RECORD_FILE)
    fileio.makedirs(os.path.dirname(path))
    with fileio.open(path, "w") as handle:
        handle.write(json.dumps(record.to_json(), sort_keys=True))


def read_json(serving_model_dir: str, name: str) -> dict[str, Any]:
    """A JSON file beside the model at ``serving_model_dir`` (EVALUATION_FILE...), {} when there is none."""
    path = join(serving_model_dir, name)
    reader = file_reader(path)
    if not reader.exists(path):
        return {}
    with reader.open(path, "r") as handle:
        found = json.loads(handle.read())
    return found if isinstance(found, dict) else {}
