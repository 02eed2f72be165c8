"""tfxd's own files on a Cloud Storage bucket (task records, run summaries, history pages, the training and
pushed records it reads back) through google-cloud-storage, the client Beam's GCSIO uses; artifacts stay with
TFX's fileio (TensorFlow's GCS filesystem), which the components' own code reads and writes.

Why not fileio for these too: TensorFlow is 2 s of imports for a process that only reads a few records (the
history task of a compiled pipeline, `tfxd replay` reading its run back, `tfxd history` on a laptop), and its
GCS filesystem spends a request per folder level making folders an object store does not have. The answers
are TensorFlow's (tsl/platform/cloud/gcs_file_system.cc): a folder is any object under `name/` (its marker
`name/` too), a bucket's root is the bucket, a listing names a folder with its trailing `/`. An object is
written whole in one upload, retried on 429, 5xx and a dropped connection (the same bytes again), or fails
naming it. Credentials as Beam's GCSIO finds them (google.auth.default): the cluster's metadata server, a
laptop's application-default login."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"]
_CLIENT: list[Any] = []  # the process's one client: credentials are looked up once
_CLIENT_LOCK = threading.Lock()


def client() -> Any:
    """The process's google-cloud-storage client (made on first use)."""
    with _CLIENT_LOCK:
        if not _CLIENT:
            import google.auth  # start-up: the storage client only for a bucket
            from google.auth.exceptions import DefaultCredentialsError
            from google.cloud import storage  # type: ignore[attr-defined]  # google.cloud is a namespace package

            try:
                credentials, project = google.auth.default(scopes=_SCOPES)
            except DefaultCredentialsError as exc:
                raise OSError(f"no Google credentials to reach Cloud Storage: {exc} (on a laptop: `gcloud auth "
                              "application-default login`; on a cluster: the pod's service account)") from exc
            # google-auth looks the credentials' Regional Access Boundary up in a daemon thread after their first
            # token (google/auth/_regional_access_boundary_utils.py); a process that ends while that thread is in
            # OpenSSL dies of SIGSEGV (a refused `tfxd run` exited -11, not 1). Looked up in the calling thread
            # instead: once a process, its fail-fast lookup (3 s at most, no retries), nothing left running.
            boundary = getattr(credentials, "_rab_manager", None)
            if boundary is not None:
                boundary.enable_blocking_lookup()
            _CLIENT.append(storage.Client(project=project, credentials=credentials))
        return _CLIENT[0]


def split(uri: str) -> tuple[str, str]:
    """(bucket, object name) of a gs:// URI; the name is empty for the bucket's root."""
    if not uri.startswith("gs://"):
        raise ValueError(f"{uri}: not a gs:// path")
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    return bucket, name


def _folder(name: str) -> str:
    return name.rstrip("/") + "/" if name.strip("/") else ""


def isdir(uri: str) -> bool:
    """A bucket that exists, or any object under ``uri``/ (a folder's marker too)."""
    bucket, name = split(uri)
    if not _folder(name):
        return bool(client().bucket(bucket).exists())
    return any(True for _ in client().list_blobs(bucket, prefix=_folder(name), max_results=1))


def exists(uri: str) -> bool:
    """An object named ``uri``, or a folder (isdir)."""
    bucket, name = split(uri)
    if name.strip("/") and not name.endswith("/") and client().bucket(bucket).blob(name).exists():
        return True
    return isdir(uri)


def listdir(uri: str) -> list[str]:
    """The names under the folder ``uri``, a folder's with its trailing /; FileNotFoundError when there is no
    such folder."""
    bucket, name = split(uri)
    prefix = _folder(name)
    listing = client().list_blobs(bucket, prefix=prefix, delimiter="/")
    names, seen = [], False
    for blob in listing:  # the folders (listing.prefixes) are known once every page is read
        seen = True
        if blob.name != prefix:
            names.append(blob.name[len(prefix):])
    names += [folder[len(prefix):] for folder in listing.prefixes]
    if not seen and not names and (prefix or not client().bucket(bucket).exists()):  # a bucket's root: the bucket
        raise FileNotFoundError(f"{uri}: no such folder on Cloud Storage")
    return sorted(names)


def read(uri: str) -> bytes:
    """The bytes of the object ``uri``; FileNotFoundError when there is none."""
    from google.api_core import exceptions  # start-up: with the client

    bucket, name = split(uri)
    try:
        return bytes(client().bucket(bucket).blob(name).download_as_bytes())
    except exceptions.NotFound as exc:
        raise FileNotFoundError(f"{uri}: no such object on Cloud Storage") from exc


def open_to_read(uri: str, mode: str = "r") -> Any:
    """The object ``uri`` as a file to read: bytes for "rb", UTF-8 text for "r"."""
    if mode not in ("r", "rb"):
        raise ValueError(f"{uri}: tfxd reads its own bucket objects whole (mode r or rb), not {mode!r}")
    data = read(uri)
    return io.BytesIO(data) if mode == "rb" else io.StringIO(data.decode("utf-8"))


def write(uri: str, data: bytes, **conditions: Any) -> None:
    """``data`` as the object ``uri``, in one upload (it appears whole or not at all). Retried as
    google-cloud-storage retries an idempotent upload: a write of the same bytes again is one. ``conditions``
    (if_generation_match=0) go to the upload as Cloud Storage preconditions."""
    from google.api_core import exceptions  # start-up: with the client
    from google.cloud.storage.retry import DEFAULT_RETRY

    bucket, name = split(uri)
    try:
        client().bucket(bucket).blob(name).upload_from_string(data, retry=DEFAULT_RETRY, **conditions)
    except exceptions.PreconditionFailed:
        raise
    except exceptions.GoogleAPIError as exc:
        raise OSError(f"{uri}: Cloud Storage refused the upload: {exc}") from exc


def copy_folder(source: str, destination: str, keep: Callable[[str], bool] = lambda uri: True) -> None:
    """Every object under the folder ``source`` that ``keep`` takes (called with the object's URI, a folder
    marker's without its trailing /) copied to the same place under ``destination`` by Cloud Storage itself (a
    rewrite: one request an object, no bytes through this machine), after whatever was under ``destination``
    is deleted; ``destination``'s own marker is written, as TensorFlow's makedirs writes it. Where TensorFlow's
    filesystem copies a file it asks four times whether the copy exists, reads it and uploads it (seven
    requests), and makes each folder level by level (eight)."""
    from google.cloud.storage.retry import DEFAULT_RETRY  # start-up: with the client

    source_bucket, source_name = split(source)
    target_bucket, target_name = split(destination)
    source_prefix, target_prefix = _folder(source_name), _folder(target_name)
    if not target_prefix:
        raise ValueError(f"{destination}: a copy goes to a folder, not a bucket's root")
    target = client().bucket(target_bucket)
    stale = list(client().list_blobs(target_bucket, prefix=target_prefix))
    for blob in stale:
        blob.delete(retry=DEFAULT_RETRY)
    write(f"gs://{target_bucket}/{target_prefix}", b"")
    for blob in client().list_blobs(source_bucket, prefix=source_prefix):
        relative = blob.name[len(source_prefix):]
        if relative and keep(f"gs://{source_bucket}/{blob.name}".rstrip("/")):
            _rewrite(blob, target.blob(target_prefix + relative), destination)


def copy(source: str, destination: str, overwrite: bool = False) -> None:
    """The object ``source`` copied to ``destination`` by Cloud Storage itself; FileExistsError where the
    destination exists and ``overwrite`` is off (asked first, as TensorFlow's copy asks, and made a
    precondition of the copy, which Cloud Storage holds to: no other writer slips in between)."""
    from google.api_core import exceptions  # start-up: with the client

    source_bucket, source_name = split(source)
    target_bucket, target_name = split(destination)
    target = client().bucket(target_bucket).blob(target_name)
    conditions = {} if overwrite else {"if_generation_match": 0}
    exists = FileExistsError(f"{destination}: already exists on Cloud Storage")
    if not overwrite and target.exists():
        raise exists
    try:
        _rewrite(client().bucket(source_bucket).blob(source_name), target, destination, **conditions)
    except exceptions.PreconditionFailed as exc:
        raise exists from exc
    except exceptions.NotFound as exc:
        raise FileNotFoundError(f"{source}: no such object on Cloud Storage") from exc


def _rewrite(source: Any, target: Any, where: str, **conditions: Any) -> None:
    """``source`` rewritten to ``target``, a call at a time until Cloud Storage says it is done (a large
    object across locations takes several). Retried as google-cloud-storage retries an idempotent request:
    the same object to the same name again is one."""
    from google.api_core import exceptions  # start-up: with the client
    from google.cloud.storage.retry import DEFAULT_RETRY

    token = None
    try:
        while True:
            token, _, _ = target.rewrite(source, token=token, retry=DEFAULT_RETRY, **conditions)
            if token is None:
                return
    except (exceptions.PreconditionFailed, exceptions.NotFound):
        raise
    except exceptions.GoogleAPIError as exc:
        raise OSError(f"{where}: Cloud Storage refused the copy of {source.name}: {exc}") from exc
