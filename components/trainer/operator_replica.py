"""One replica of the Trainer's operator job (a TrainJob's node or a TFJob's replica):
`python -m tfxd.components.trainer.operator_replica ENCODED`, ENCODED being the launching task's inputs,
outputs and properties (operator_job.replica_args). The replica trains with tfxd's Trainer executor; its
planner reads the cluster the operator described (a TFJob's TF_CONFIG, a TrainJob's JobSet environment:
trainer_module/cluster.py). Only the chief writes the model where the pipeline expects it
(trainer_module/export.py)."""

from __future__ import annotations

import sys

from absl import logging
from tfx.types import artifact_utils

from tfxd.components.trainer.executor import Executor
from tfxd.components.trainer.operator_job import decode


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: python -m tfxd.components.trainer.operator_replica ENCODED_INPUTS (written by the "
                 "operator job's launcher, components/trainer/job_launch.py)")
    logging.use_absl_handler()  # the pod's log is this process's stderr: keep TFX's INFO lines there
    logging.set_verbosity(logging.INFO)
    payload = decode(argv[0])
    Executor().train_replica(artifact_utils.parse_artifact_dict(payload["inputs"]),
                             artifact_utils.parse_artifact_dict(payload["outputs"]), payload["exec_properties"])


if __name__ == "__main__":
    main(sys.argv[1:])
