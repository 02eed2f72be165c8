"""tfxd's StatisticsGen: TFX's, reading its examples a file at a time (tfxd.example_files)."""
