"""What runs inside the Trainer: run_fn, strategy planner, input pipeline, models, callbacks, export.
docs/distributed.md has the planner's decision table."""
