"""Trainer executor: TFX's GenericExecutor calling tfxd's run_fn, with what TFX leaves to the user.

- Facts run_fn needs that TFX does not pass (the train split's size, a backup dir that survives a
  restart) go into its custom_config.
- Only the chief writes serving_model_dir: a non-chief replica that leaves no model is fine.
- ``local_cluster`` (targets.local.trainer with workers > 1 or parameter servers) runs the training as
  local processes with their own TF_CONFIG, on localhost or on hosts of their own (see local_cluster.py).

The other ways the Trainer runs sit beside it: local_cluster.py (local processes), vertex_job.py
(a Vertex AI custom job whose replicas run this executor), job_launch.py (a Kubeflow Trainer v2
TrainJob, trainjob.py, or a TFJob, tfjob.py, whose replicas run it through operator_replica.py).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tfx.components.trainer.executor import GenericExecutor
from tfx.components.util import udf_utils
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs

from tfxd import files, keys, stops, trainer_config
from tfxd.components.trainer import local_cluster
from tfxd.training_report import TrainingReport

BACKUPS = ".backup"  # beside the Trainer's outputs: one folder per training, named by its inputs and config


def _backup_dir(input_dict, output_dict, exec_properties) -> str:
    """Where BackupAndRestore keeps its checkpoints: the same folder for a retry of the same training
    (same inputs, same config), so a Trainer that was killed resumes from its last epoch. TFX's stateful
    working dir is new for every execution, so it cannot serve here."""
    import hashlib

    inputs = sorted(artifact.uri for artifacts in input_dict.values() for artifact in artifacts)
    key = json.dumps([inputs, exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY)], sort_keys=True)
    model_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY])
    node_dir = os.path.dirname(os.path.dirname(model_uri.rstrip("/")))
    return os.path.join(node_dir, BACKUPS, hashlib.sha256(key.encode()).hexdigest()[:16])


def in_cluster_replica() -> bool:
    """Whether this process is one replica of a training cluster (TF_CONFIG, or Vertex's CLUSTER_SPEC),
    which trains beside others into the task's outputs, rather than the task itself."""
    return bool(os.environ.get("TF_CONFIG") or os.environ.get("CLUSTER_SPEC"))


def drop_backup(backup_dir: str) -> None:
    """A completed training leaves no backup (Keras removes the checkpoints, not the folder nor what a
    killed worker left), so that the same training asked for again starts at epoch 1; nor does any
    training before it that never finished (stopped, then its inputs changed, so no retry will resume it):
    the backups beside it go too. Only the task that trained calls this, under the run lock locally; on a
    cluster the folder is the run's own (its outputs' parent), shared only with the task's own retries."""
    parent = os.path.dirname(backup_dir.rstrip("/"))
    folder = parent if os.path.basename(parent) == BACKUPS else backup_dir
    if fileio.exists(folder):
        fileio.rmtree(folder)


class Executor(GenericExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        if not in_cluster_replica():  # the task itself (a replica of a Vertex job runs Do too: not there)
            files.empty_outputs(output_dict)  # a retry in place meets the first attempt's half-saved model
        exec_properties, config = self._with_run_facts(input_dict, output_dict, exec_properties)
        cluster, backup_dir = config.local_cluster, config.backup_dir or ""
        if cluster and cluster.distributed:
            try:
                local_cluster.train(input_dict, output_dict, exec_properties, cluster, self._log_dir())
            except local_cluster.WorkerFailed as failure:
                if fileio.exists(os.path.join(backup_dir, "chief", "checkpoint")):
                    raise local_cluster.WorkerFailed(f"{failure}. Run the same command again to resume from the "
                                                     f"last epoch checkpointed in {backup_dir}") from None
                raise
            self._check_model(output_dict)
            drop_backup(backup_dir)
            return
        if in_cluster_replica():  # a replica of a Vertex custom job: every task's BackupAndRestore cleans up
            self.train_replica(input_dict, output_dict, exec_properties)
            return
        self.train(input_dict, output_dict, exec_properties)
        drop_backup(backup_dir)

    def train(self, input_dict, output_dict, exec_properties) -> None:
        """Run run_fn (trainer_module.run_fn) in this process; the chief must leave a model."""
        fn_args = self._GetFnArgs(input_dict, output_dict, exec_properties)
        result = udf_utils.get_fn(exec_properties, "run_fn")(fn_args)
        plan = result.plan if isinstance(result, TrainingReport) else result  # a serving task's plan
        if plan.writes_the_model:
            self._check_model(output_dict)

    def train_replica(self, input_dict, output_dict, exec_properties) -> None:
        """train() as one replica of a cluster (a TFJob's pod, a local cluster's process, a Vertex replica): a
        stop (SIGTERM, SIGINT) ends it within stops.STOP_SECONDS with the signal's exit status, saying where
        the retried training resumes from, wherever it was (a collective may wait on a peer that is gone,
        a parameter server never returns from its join)."""
        try:
            with stops.handling(stops.DEADLINE_SECONDS):
                self.train(input_dict, output_dict, exec_properties)
        except stops.Stopped as stop:
            backup_dir = trainer_config.of(exec_properties).backup_dir
            task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
            sys.stderr.write(f"tfxd: Trainer replica {task.get('type', '?')}-{task.get('index', '?')} stopped by "
                             f"{stops.name(stop.signum)}; the retried training resumes from the last epoch backed "
                             f"up in {backup_dir}\n")
            sys.stderr.flush()
            sys.exit(stops.exit_status(stop.signum))

    def _model_written(self, output_dict) -> bool:
        model_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY])
        return fileio.exists(os.path.join(model_uri, "Format-Serving"))

    def _check_model(self, output_dict) -> None:
        if not self._model_written(output_dict):
            raise RuntimeError("the chief finished training without writing the serving model")

    def _with_run_facts(self, input_dict, output_dict,
                        exec_properties) -> tuple[dict[str, Any], trainer_config.TrainerCustomConfig]:
        """The custom_config with the run's facts added (the train split's size, the spans read, the backup
        folder): as the exec properties the replicas are handed, and as read here."""
        examples = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
        counts = examples.get_string_custom_property(keys.SPLIT_COUNTS_PROPERTY)
        read = examples.get_string_custom_property(keys.SPANS_PROPERTY)
        config = trainer_config.of(exec_properties).with_run_facts(
            json.loads(counts).get("train") if counts else None, json.loads(read) if read else None,
            _backup_dir(input_dict, output_dict, exec_properties))
        return {**exec_properties, standard_component_specs.CUSTOM_CONFIG_KEY: config.to_text()}, config

    def _log_dir(self) -> str:
        return os.environ.get(keys.LOG_DIR_ENV) or os.path.join(self._get_tmp_dir(), "worker-logs")
