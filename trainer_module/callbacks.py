"""Keras callbacks from the spec's `training.callbacks`, plus a progress line per epoch."""

from __future__ import annotations

import time
from typing import Any

from trainer_module.models import import_object


def progress_callback(total_epochs: int, is_chief: bool):
    import tensorflow as tf

    class Progress(tf.keras.callbacks.Callback):
        """One line per epoch through tfxd's console: loss and metrics, train and validation."""

        def on_train_begin(self, logs=None):
            self.history: list[dict[str, float]] = []

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            values = {k: float(v) for k, v in (logs or {}).items() if not k.startswith("lr")}
            self.history.append({"epoch": epoch + 1, **values})
            if is_chief:
                from pipeline import console

                shown = "  ".join(f"{k} {v:.4f}" for k, v in values.items())
                console.step(f"Trainer epoch {epoch + 1}/{total_epochs} ({time.monotonic() - self._start:.1f} s): "
                             f"{shown}")

    return Progress()


def build(config: dict[str, Any], model_run_dir: str, backup_dir: str | None, total_epochs: int,
          is_chief: bool) -> list[Any]:
    """The spec's callbacks; TensorBoard logs land under the model run dir, backups in ``backup_dir``."""
    import tensorflow as tf

    callbacks: list[Any] = [progress_callback(total_epochs, is_chief)]
    if config["tensorboard"]:
        callbacks.append(tf.keras.callbacks.TensorBoard(log_dir=model_run_dir, update_freq="epoch"))
    if config["backup_and_restore"] and backup_dir:
        callbacks.append(tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir))
    if config["terminate_on_nan"]:
        callbacks.append(tf.keras.callbacks.TerminateOnNaN())
    if config["early_stopping"]:
        callbacks.append(tf.keras.callbacks.EarlyStopping(**config["early_stopping"]))
    if config["reduce_lr_on_plateau"]:
        callbacks.append(tf.keras.callbacks.ReduceLROnPlateau(**config["reduce_lr_on_plateau"]))
    for dotted in config["custom"]:
        callbacks.append(import_object(dotted)())
    return callbacks
