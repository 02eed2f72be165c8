"""Whether a run on Cloud Storage buckets would reach one store with every client.

google-cloud-storage and Beam's GCSIO honour STORAGE_EMULATOR_HOST, Google's name for a Cloud Storage
emulator; TensorFlow's GCS filesystem, which TFX's fileio uses for every artifact, does not: its endpoints are
compiled in (tsl/platform/cloud/gcs_file_system.cc: https://www.googleapis.com/storage/v1/ and
https://storage.googleapis.com/). With the variable set and Google's names resolving elsewhere, a run would
read its data from the emulator and write its artifacts to Google's Cloud Storage, or fail half-way. tfxd
refuses that before anything is written; where Google's names lead to the emulator's host (a TLS endpoint in
front of it, as the suite's tests/buckets/ does), every client reaches the same store.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from collections.abc import Iterable

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
GOOGLE_STORAGE_NAMES = ("www.googleapis.com", "storage.googleapis.com")


class BucketsSplit(Exception):
    """The run's clients would reach different stores for its gs:// paths."""


def _addresses(host: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return set()


def check_emulator(paths: Iterable[str | None]) -> None:
    """Raise BucketsSplit when ``paths`` name a gs:// bucket, STORAGE_EMULATOR_HOST is set, and Google's
    storage names do not resolve to the emulator's host."""
    emulator = os.environ.get(EMULATOR_ENV, "").strip()
    if not emulator or not any(path and path.startswith("gs://") for path in paths):
        return
    host = urllib.parse.urlsplit(emulator if "://" in emulator else f"http://{emulator}").hostname or ""
    wanted = _addresses(host)
    for name in GOOGLE_STORAGE_NAMES:
        found = _addresses(name)
        if not wanted or not found or not found <= wanted:
            where = f"resolves to {', '.join(sorted(found))}" if found else "does not resolve"
            raise BucketsSplit(
                f"{EMULATOR_ENV}={emulator} sends google-cloud-storage and Beam to a Cloud Storage emulator, but "
                f"TensorFlow's GCS filesystem (TFX's fileio, every artifact) has Google's endpoints compiled in "
                f"and ignores it: {name} {where} here, not to {host}. Unset {EMULATOR_ENV} to use Cloud Storage "
                "itself, or send www.googleapis.com and storage.googleapis.com to a TLS endpoint in front of the "
                "emulator (docs/targets.md, Buckets)")
