"""`tfxd replay`: a compiled Kubeflow/Vertex file executed here, task by task, as the KFP v2 launcher
would."""
