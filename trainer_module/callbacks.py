"""Keras callbacks from the spec's `training.callbacks`, plus a progress line per epoch."""

from __future__ import annotations

import time
from typing import Any

from tfxd import console, stops
from tfxd.trainer_module.models import import_object


def progress_callback(total_epochs: int, is_chief: bool) -> Any:
    import tensorflow as tf

    class Progress(tf.keras.callbacks.Callback):
        """One line per epoch through tfxd's console: loss and metrics, train and validation."""

        def on_train_begin(self, logs: Any = None) -> None:
            self.history: list[dict[str, float]] = []

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self._start = time.monotonic()
            self._validation_start: float | None = None

        def on_test_begin(self, logs: Any = None) -> None:  # fit's validation, at the end of an epoch
            self._validation_start = time.monotonic()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            end = time.monotonic()
            values = {k: float(v) for k, v in (logs or {}).items() if not k.startswith("lr")}
            # the epoch's time, and the part spent on training steps (without validation): for throughput
            timing = {"seconds": round(end - self._start, 4),
                      "train_seconds": round((self._validation_start or end) - self._start, 4)}
            self.history.append({"epoch": epoch + 1, **values, **timing})
            if is_chief:
                shown = "  ".join(f"{k} {v:.4f}" for k, v in values.items())
                console.step(f"Trainer epoch {epoch + 1}/{total_epochs} ({timing['seconds']:.1f} s): {shown}")

    return Progress()


def start_note(backup: Any, backup_dir: str, total_epochs: int, steps_per_epoch: int, is_chief: bool) -> Any:
    """Says where training starts: epoch 1, or where ``backup`` (BackupAndRestore, which must come before
    it in the list) restored a killed training to, with the step when that is inside an epoch (a backup
    every training.callbacks.backup_every_steps steps). Keras restores silently."""
    import tensorflow as tf
    from absl import logging

    class StartNote(tf.keras.callbacks.Callback):
        def on_train_begin(self, logs: Any = None) -> None:
            self._noted = False

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if self._noted:
                return
            self._noted = True
            # the step after the one backed up, counted from 1; Keras keeps -1 where no step was (a fresh
            # training, ParameterServer) and goes on at the next epoch after an epoch's last step
            step = int(backup._training_state._ckpt_saved_batch.numpy()) + 2  # noqa: SLF001 - Keras's record
            within = 1 < step <= steps_per_epoch
            if epoch == 0 and not within:
                logging.info("tfxd trainer: starts at epoch 1/%d; BackupAndRestore checkpoints go to %s",
                             total_epochs, backup_dir)
                return
            at = f", step {step} of {steps_per_epoch}," if within else ""
            message = (f"resumes at epoch {epoch + 1}/{total_epochs}{at} from the BackupAndRestore checkpoint "
                       f"in {backup_dir}")
            logging.info("tfxd trainer: %s", message)
            if is_chief:
                console.step(f"Trainer {message}")

    return StartNote()


def step_backup(backup_dir: str, steps_per_epoch: int, every_steps: int, delete_checkpoint: bool) -> Any:
    """Keras's BackupAndRestore, backing up at each epoch's last step and every ``every_steps`` steps within
    an epoch (at the end of the call of the compiled step that reaches them), each backup recording its
    step as the last of its call. Keras's own save_freq counts calls across epochs, so its backups drift off
    the epochs' ends; and Keras records the step a call began at (tf_keras callbacks.py:
    on_train_batch_begin assigns _ckpt_saved_batch, and WorkerTrainingState.back_up saves that variable,
    whatever batch it is handed), while the state it saves is after the call's last step: with several steps
    a call, a resume from an epoch's last backup went on inside that epoch (a local cluster's rerun trained
    all 10 epochs again) and a mid-epoch one trained the call's other steps twice. Not for ParameterServer,
    where Keras runs no batch hooks (build)."""
    import tensorflow as tf

    class StepBackup(tf.keras.callbacks.BackupAndRestore):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            super().on_epoch_begin(epoch, logs)
            self._backed_up = -1  # the step of this epoch last backed up (a resumed epoch: counts from its start)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self._training_state._ckpt_saved_batch.assign(batch)  # noqa: SLF001 - what Keras saves
            self._training_state.backup_if_preempted()  # noqa: SLF001 - as Keras's own hook
            if batch + 1 >= steps_per_epoch or batch - self._backed_up >= every_steps:
                self._backed_up = batch
                self._backup(epoch=self._current_epoch, batch=batch)

    # save_freq: any number turns Keras's batch hooks on; the hook above decides when to back up
    return StepBackup(backup_dir=backup_dir, save_freq=1, delete_checkpoint=delete_checkpoint)


def stop_at_step(backup: Any) -> Any:
    """A stop asked for by a signal (tfxd.stops) ends the training at the next step boundary (the end of
    the current call of the compiled step, which runs the plan's steps_per_execution steps), after
    ``backup`` (BackupAndRestore, or None) saved the training state at that step: the retried Trainer
    resumes there."""
    import tensorflow as tf

    class StopAtStep(tf.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self._supports_tf_logs = True  # it reads no logs: Keras need not copy them to numpy every step

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            signum = stops.requested()
            if signum is None:
                return
            if backup is not None:
                backup._backup(epoch=backup._current_epoch, batch=batch)  # noqa: SLF001 - Keras' own step save
                console.step(f"Trainer stopped by {stops.name(signum)} after step {batch + 1} of epoch "
                             f"{backup._current_epoch + 1}; its state is backed up")  # noqa: SLF001
            raise stops.Stopped(signum)

    return StopAtStep()


def build(config: dict[str, Any], model_run_dir: str, backup_dir: str | None, total_epochs: int,
          is_chief: bool, steps_per_epoch: int, single_worker: bool,
          batch_level: bool = True) -> list[Any]:
    """The spec's callbacks; TensorBoard logs land under the model run dir, backups in ``backup_dir``.
    Batch hooks run once per call of the compiled step (``steps_per_execution`` steps, fewer at an
    epoch's end: Keras runs no call across epochs).
    ``batch_level`` False (ParameterServer: Keras cannot run batch-level callbacks there) leaves out
    TerminateOnNaN, saying so in the log. A ``single_worker`` training stops at a step boundary when a
    signal asks it to; workers of a cluster cannot agree on a step without a collective, stop at once, and
    resume from the last backup (each epoch's end, and every `backup_every_steps` steps within one)."""
    import tensorflow as tf
    from absl import logging

    callbacks: list[Any] = [progress_callback(total_epochs, is_chief)]
    if config["tensorboard"]:
        callbacks.append(tf.keras.callbacks.TensorBoard(log_dir=model_run_dir, update_freq="epoch"))
    backup = None
    if config["backup_and_restore"] and backup_dir:
        # by step rather than "epoch": Keras then records the step of a backup and resumes mid-epoch from one
        # taken on a stop or within a long epoch; ParameterServer backs up by epoch only. A single worker's
        # backup outlives a stop that came after its last step; the Trainer executor drops it once the
        # model is written (components/trainer/executor.py)
        if batch_level:
            backup = step_backup(backup_dir, steps_per_epoch, config["backup_every_steps"],
                                 delete_checkpoint=not single_worker)
        else:
            backup = tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir, save_freq="epoch",
                                                         delete_checkpoint=True)
        callbacks.append(backup)
        callbacks.append(start_note(backup, backup_dir, total_epochs, steps_per_epoch, is_chief))
    if batch_level:  # a cluster's worker stops at once (tfxd.stops raises in the handler), unless TensorFlow
        # swallowed that raise (Python code it called back, such as a checkpoint's): then at its next step
        callbacks.append(stop_at_step(backup if single_worker else None))
    if config["terminate_on_nan"] and batch_level:
        callbacks.append(tf.keras.callbacks.TerminateOnNaN())
    elif config["terminate_on_nan"]:
        logging.warning("tfxd: TerminateOnNaN is a batch-level callback, which Keras does not support under "
                        "ParameterServerStrategy; training runs without it")
    if config["early_stopping"]:
        callbacks.append(tf.keras.callbacks.EarlyStopping(**config["early_stopping"]))
    if config["reduce_lr_on_plateau"]:
        callbacks.append(tf.keras.callbacks.ReduceLROnPlateau(**config["reduce_lr_on_plateau"]))
    for dotted in config["custom"]:
        callbacks.append(import_object(dotted)())
    return callbacks
