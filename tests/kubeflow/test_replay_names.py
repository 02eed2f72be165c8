"""The executors replay tells apart by their class paths (keys.OPERATOR_JOB_EXECUTOR, VERTEX_JOB_EXECUTOR)
without importing them are the classes the compiled files name: a class moved or renamed fails here, not as a
replay that quietly runs a Trainer task against the real Kubernetes or Vertex API."""

from __future__ import annotations

from tfx.utils import name_utils

from tfxd import keys
from tfxd.components.trainer import job_launch, vertex_job


def test_the_named_executors_are_the_classes():
    assert name_utils.get_full_name(job_launch.OperatorExecutor) == keys.OPERATOR_JOB_EXECUTOR
    assert name_utils.get_full_name(vertex_job.Executor) == keys.VERTEX_JOB_EXECUTOR
