"""The cluster targets tfxd compiles for, submits to and schedules on, by the spec's name for each: the one
table of their names on this floor (pipeline/spec/targets.py has the spec's)."""

from __future__ import annotations

from tfxd.kubeflow.cluster_target import ClusterTarget
from tfxd.kubeflow.kubeflow_pipelines import KubeflowPipelines
from tfxd.kubeflow.vertex import VertexPipelines

TARGETS: dict[str, ClusterTarget] = {target.NAME: target for target in (KubeflowPipelines(), VertexPipelines())}


def cluster_target(name: str) -> ClusterTarget:
    """The target of that name; ValueError naming the ones there are."""
    if name not in TARGETS:
        raise ValueError(f"compile, submit, schedules and replay are for targets {' and '.join(sorted(TARGETS))}, "
                         f"not {name!r}")
    return TARGETS[name]
