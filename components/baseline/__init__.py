"""tfxd's baseline finder: the newest model Pusher pushed, other than the candidate, as a container task
(what the open-source Kubeflow Pipelines backend can run, where TFX's resolver cannot)."""
