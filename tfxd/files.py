"""Paths and files: what counts as a URI rather than a local path, where a run on a bucket keeps what only a
local disk can hold, and atomic writes (a reader, or a run killed half-way, never sees half a file)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfxd import bucket_objects


def is_uri(path: str) -> bool:
    """A bucket or other remote location (gs://..., s3://...), as opposed to a local path."""
    return "://" in path


def local_state(root: str) -> str:
    """Where the runs of ``root`` keep what must be on a local disk: ML Metadata's SQLite file, the run lock,
    the log being written. ``root`` itself when it is local; for a bucket (`gs://B/P`), a folder of this
    machine's state home ($XDG_STATE_HOME, else ~/.local/state): `<state home>/tfxd/gs/B/P`. SQLite cannot
    live on an object store, nor can a lock or a file appended to line by line."""
    if not is_uri(root):
        return root
    scheme, rest = root.split("://", 1)
    home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(home, "tfxd", scheme, *[part for part in rest.split("/") if part not in ("", ".", "..")])


def join(base: str, *parts: str) -> str:
    """``parts`` under ``base``, a local folder or a bucket URI (always with /)."""
    return "/".join(part.rstrip("/") for part in (base, *parts)) if is_uri(base) else os.path.join(base, *parts)


@dataclass(frozen=True)
class Reader:
    """The four file calls a reader of a folder needs, for one kind of path (file_reader)."""

    exists: Callable[[str], bool]
    isdir: Callable[[str], bool]
    listdir: Callable[[str], list[str]]  # names; a bucket's folders may end with /
    open: Callable[..., Any]


def file_reader(path: str) -> Reader:
    """os for a local path, google-cloud-storage for a gs:// one (tfxd.bucket_objects), TFX's fileio
    (TensorFlow's file systems) for another URI: what reads records, reports and pushed versions never
    loads TensorFlow for them."""
    if not is_uri(path):
        return Reader(os.path.exists, os.path.isdir, os.listdir, _open_local)
    if path.startswith("gs://"):
        return Reader(bucket_objects.exists, bucket_objects.isdir, bucket_objects.listdir,
                      bucket_objects.open_to_read)
    from tfx.dsl.io import fileio  # start-up: TFX's file systems (TensorFlow) only for such a URI

    return Reader(fileio.exists, fileio.isdir, fileio.listdir, fileio.open)


def _open_local(path: str, mode: str = "r") -> Any:
    """A local file, its text as UTF-8 (what tfxd writes) whatever the machine's locale."""
    return open(path, mode, encoding=None if "b" in mode else "utf-8")  # noqa: SIM115 - the caller's `with`


def write_atomic(path: str, content: str | bytes) -> str:
    """Write ``content`` (text as UTF-8) to ``path`` through a hidden partial file and a rename; on a bucket,
    as one object in one upload (an object store has no rename, and an object appears whole or not at all)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    if path.startswith("gs://"):
        bucket_objects.write(path, data)
        return path
    if is_uri(path):
        from tfx.dsl.io import fileio  # start-up: TFX's file systems only when asked

        with fileio.open(path, "wb") as handle:
            handle.write(data)  # one write: the upload at close() carries all of it or fails
        return path
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)  # a full disk, a signal: no half-written file is left behind
        raise
    return path


def create_once(uri: str, content: str) -> str:
    """Create the bucket object ``uri`` holding ``content`` unless it exists; what it holds, either way. Of
    writers racing to create it, exactly one does and all read its content: Cloud Storage's precondition
    ifGenerationMatch=0, which TensorFlow's GCS filesystem cannot send (google-cloud-storage can, and retries
    a conditional upload on 429 and 5xx)."""
    if not uri.startswith("gs://"):
        raise ValueError(f"{uri}: only a gs:// object can be created once (validate refuses other schemes)")
    from google.api_core import exceptions  # start-up: only for a bucket root

    try:
        bucket_objects.write(uri, content.encode("utf-8"), if_generation_match=0)
        return content
    except exceptions.PreconditionFailed:
        return bucket_objects.read(uri).decode("utf-8")


def write_json(path: str, content: Any, **options: Any) -> str:
    """``content`` as indented JSON (``options`` go to json.dumps), atomically."""
    return write_atomic(path, json.dumps(content, indent=options.pop("indent", 2), **options) + "\n")


def remove(path: str) -> None:
    """Remove the folder or file at ``path``, local or on a bucket, if there is one."""
    if not is_uri(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
        return
    from tfx.dsl.io import fileio  # start-up: TFX's file systems only when asked

    if fileio.isdir(path):
        fileio.rmtree(path)
    elif fileio.exists(path):
        fileio.remove(path)


def empty_outputs(output_dict: dict[str, list[Any]]) -> list[str]:
    """Remove whatever the output artifacts' folders hold, keeping the folders: Kubeflow and Vertex retry a
    failed task in place, on the same output URIs, where the first attempt's partial files would
    otherwise mix with the retry's (extra shards read as data, a half-saved model). Every tfxd executor
    starts with this. Returns what was removed."""
    from tfx.dsl.io import fileio  # start-up: the ground loads TFX's file systems only when asked

    removed = []
    for artifacts in output_dict.values():
        for artifact in artifacts:
            uri = artifact.uri
            if not uri or not fileio.exists(uri):
                continue
            if not fileio.isdir(uri):
                fileio.remove(uri)
                removed.append(uri)
                continue
            for name in fileio.listdir(uri):
                path = join(uri, name)
                remove(path)
                removed.append(path)
    return removed


class PipelineTempRemovedExecutor:
    """A TFX Beam executor mixin (first in the bases): the pipelines TFX's _make_beam_pipeline makes for it
    remove their temporary folder even when building the graph fails (PipelineTempRemoved)."""

    def _make_beam_pipeline(self) -> PipelineTempRemoved:
        return PipelineTempRemoved(super()._make_beam_pipeline())  # type: ignore[misc]


class PipelineTempRemoved:
    """A Beam pipeline for a with-block that removes its local temporary folder however the block ends.
    Beam makes the folder when the pipeline is made and removes it in run() only
    (apache_beam/pipeline.py, Pipeline.__init__ and run): a block that fails while building the graph
    (bad data found on reading a header, a bad column) leaves it in the temporary folder, run after run.
    ``with PipelineTempRemoved(pipeline) as p`` binds the pipeline itself."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    def __enter__(self) -> Any:
        return self.pipeline.__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            self.pipeline.__exit__(*exc)
        finally:
            shutil.rmtree(self.pipeline.local_tempdir, ignore_errors=True)
