"""What a dead run leaves in its root (SIGKILL, out of memory, Ctrl-C): executions ML Metadata still
calls RUNNING and the output folders they had begun. TFX never publishes such outputs, so no later run
reads them; settling records the executions as CANCELED, their outputs as ABANDONED, and removes those
folders, so ML Metadata says what happened and the disk holds nothing half-written."""

from __future__ import annotations

import logging
import os

from ml_metadata.proto import metadata_store_pb2 as mlmd

from tfxd.files import is_uri, remove
from tfxd.pipeline.run import metadata


def settle(root: str) -> list[str]:
    """Settle what earlier runs of ``root`` left unfinished; the names of their components. Only under
    the run lock (no other process can still be running them). A failure is logged, never fatal."""
    if not os.path.exists(metadata.metadata_path(root)):
        return []
    try:
        return _settle(root)
    except Exception:  # noqa: BLE001 - bookkeeping only: the run goes on
        logging.exception("could not settle the unfinished executions of %s", root)
        return []


def _settle(root: str) -> list[str]:
    store = metadata.open_store(root, readonly=False)
    unfinished = [e for e in store.get_executions() if e.last_known_state == mlmd.Execution.RUNNING]
    if not unfinished:
        return []
    for execution in unfinished:
        execution.last_known_state = mlmd.Execution.CANCELED
    store.put_executions(unfinished)
    outputs = {event.artifact_id for event in store.get_events_by_execution_ids([e.id for e in unfinished])
               if event.type in (mlmd.Event.OUTPUT, mlmd.Event.PENDING_OUTPUT)}
    begun = [a for a in store.get_artifacts_by_id(sorted(outputs)) if a.state != mlmd.Artifact.LIVE]
    for artifact in begun:
        artifact.state = mlmd.Artifact.ABANDONED
        _remove_under(root, artifact.uri)
    if begun:
        store.put_artifacts(begun)
    logging.info("settled unfinished executions %s (outputs abandoned: %s)", [e.id for e in unfinished],
                 [a.uri for a in begun])
    kinds = {t.id: t.name.rsplit(".", 1)[-1] for t in store.get_execution_types()}
    return sorted({kinds.get(e.type_id, str(e.type_id)) for e in unfinished})


def _remove_under(root: str, uri: str) -> None:
    """Remove ``uri`` if it is a folder or file inside ``root``, local or on a bucket (never anything else).
    What cannot be removed is logged and left: no run reads an abandoned output, and the other executions
    are still to be settled."""
    if not uri:
        return
    if is_uri(uri) or is_uri(root):
        inside, target = uri.startswith(root.rstrip("/") + "/"), uri
    else:
        target = os.path.realpath(uri)
        inside = os.path.commonpath([target, os.path.realpath(root)]) == os.path.realpath(root)
    if inside:
        try:
            remove(target)
        except Exception as exc:  # noqa: BLE001 - OSError here, TensorFlow's OpError on a bucket
            logging.warning("could not remove the abandoned output %s: %s", target, exc)
