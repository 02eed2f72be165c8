"""tfxd's ExampleGen: csv, parquet, tfrecord, jsonl and BigQuery into tf.Examples with deterministic splits."""
