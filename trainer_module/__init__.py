"""What runs inside the Trainer: run_fn, strategy planner, input pipeline, models, callbacks, export.
README.md here has the planner's decision table."""
