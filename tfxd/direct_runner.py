"""Beam's DirectRunner as tfxd runs it, wherever a Beam pipeline is made (a run's components, a
component's own pipelines such as the drift statistics, the tests and benches that build executors).

Two flags a user of TFX and Beam 2.74 would otherwise not know to pass:
- TFX builds and stages an sdist of itself for Beam unless one of its dependency flags is set
  (tfx.utils.dependency_utils.make_beam_dependency_flags), for every Beam executor, into a temporary
  folder it never removes. The DirectRunner stages nothing, so the flag only stops that work.
- Beam 2.74's DirectRunner first hands every pipeline to the Prism runner, a Go binary it downloads from
  GitHub: offline a failed download, up to seconds a pipeline and temporary folders left behind; online
  another engine than the one tfxd sizes. It skips Prism for a pipeline pinned to an update compatibility
  version: pinning Beam's own version changes no transform (none is "prior to" it).
"""

from __future__ import annotations

NO_STAGING = "--sdk_container_image=none-needed-by-the-direct-runner"


def _no_prism() -> str:
    from importlib.metadata import version

    return f"--update_compatibility_version={version('apache-beam')}"


def direct_args(mode: str, workers: int) -> list[str]:
    """The DirectRunner in ``mode`` (in_memory, multi_processing) with ``workers`` (0: one per CPU)."""
    return ["--runner=DirectRunner", f"--direct_running_mode={mode}", f"--direct_num_workers={workers}",
            NO_STAGING, _no_prism()]
