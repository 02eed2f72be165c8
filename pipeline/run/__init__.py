"""`tfxd run`: the pipeline on a local DAG runner, one run per root, what is left unfinished settled,
and what the run did read back from ML Metadata into summary.json."""
