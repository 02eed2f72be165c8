"""tfxd's Trainer: TFX's Trainer interface, tfxd's run_fn, and localhost multi-worker training."""
