"""Keras callbacks from the spec's `training.callbacks`, plus a progress line per epoch."""

from __future__ import annotations

import time
from typing import Any

from tfxd import console
from tfxd.trainer_module.models import import_object


def progress_callback(total_epochs: int, is_chief: bool):
    import tensorflow as tf

    class Progress(tf.keras.callbacks.Callback):
        """One line per epoch through tfxd's console: loss and metrics, train and validation."""

        def on_train_begin(self, logs=None):
            self.history: list[dict[str, float]] = []

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.monotonic()
            self._validation_start = None

        def on_test_begin(self, logs=None):  # fit's validation, at the end of an epoch
            self._validation_start = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
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


def start_note(backup_dir: str, total_epochs: int, is_chief: bool):
    """Says at which epoch training starts: 1, or where BackupAndRestore (which must come before it in
    the list) restored a killed training from. Keras restores silently."""
    import tensorflow as tf
    from absl import logging

    class StartNote(tf.keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self._noted = False

        def on_epoch_begin(self, epoch, logs=None):
            if self._noted:
                return
            self._noted = True
            if epoch == 0:
                logging.info("tfxd trainer: starts at epoch 1/%d; BackupAndRestore checkpoints go to %s",
                             total_epochs, backup_dir)
                return
            message = (f"resumes at epoch {epoch + 1}/{total_epochs} from the BackupAndRestore checkpoint "
                       f"in {backup_dir}")
            logging.info("tfxd trainer: %s", message)
            if is_chief:
                console.step(f"Trainer {message}")

    return StartNote()


def build(config: dict[str, Any], model_run_dir: str, backup_dir: str | None, total_epochs: int,
          is_chief: bool, batch_level: bool = True) -> list[Any]:
    """The spec's callbacks; TensorBoard logs land under the model run dir, backups in ``backup_dir``.
    ``batch_level`` False (ParameterServer: Keras cannot run batch-level callbacks there) leaves out
    TerminateOnNaN, saying so in the log."""
    import tensorflow as tf
    from absl import logging

    callbacks: list[Any] = [progress_callback(total_epochs, is_chief)]
    if config["tensorboard"]:
        callbacks.append(tf.keras.callbacks.TensorBoard(log_dir=model_run_dir, update_freq="epoch"))
    if config["backup_and_restore"] and backup_dir:
        callbacks.append(tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir))
        callbacks.append(start_note(backup_dir, total_epochs, is_chief))
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
