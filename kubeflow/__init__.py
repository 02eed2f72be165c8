"""Kubeflow Pipelines and Vertex AI: compile, submit, schedule, replay. The only floor that imports
their SDKs (kfp, google-cloud-aiplatform)."""
