"""tfxd's ExampleValidator: TFX's, with a gate that stops the run on anomalies."""
