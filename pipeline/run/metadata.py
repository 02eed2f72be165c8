"""The local ML Metadata store of a pipeline root: where it is and how to open it, read-only for
reading back what a run did, read-write for the runner and for settling what a dead run left."""

from __future__ import annotations

import os
import re
import sqlite3

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd

from tfxd.files import local_state

FILE_NAME = "metadata.sqlite"


def metadata_path(root: str) -> str:
    """The SQLite file of ``root``'s store: in the root, or for a bucket root in its local state folder
    (tfxd.files.local_state)."""
    return os.path.join(local_state(root), FILE_NAME)


def connection_config(root: str, readonly: bool = False) -> mlmd.ConnectionConfig:
    """The SQLite connection config of ``root``'s store (read-write: created when missing)."""
    config = mlmd.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path(root)
    config.sqlite.connection_mode = (mlmd.SqliteMetadataSourceConfig.READONLY if readonly
                                     else mlmd.SqliteMetadataSourceConfig.READWRITE_OPENCREATE)
    return config


def open_store(root: str, readonly: bool = True) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(connection_config(root, readonly))


class StoreUnreadable(Exception):
    """The root's ML Metadata store exists and cannot be read; names the file, why, and what to do."""


_NEWER = re.compile(r"MLMD database version (\d+) is greater than library version (\d+)")
_OLDER = re.compile(r"MLMD database version (\d+) is older than library version (\d+)")


def check(root: str) -> None:
    """Open ``root``'s store read-only, if it exists, and read all of it: a damaged file (anywhere in it,
    not only the first pages a query happens to read), or one another ML Metadata version wrote, stops the
    run before anything is written, the file left as it is (opening it read-write would not repair it, and
    a new store in its place would lose every run's record)."""
    path = metadata_path(root)
    if not os.path.exists(path):
        return
    try:
        open_store(root, readonly=True).get_context_types()
        damage = _damage(path)
    except RuntimeError as exc:
        raise StoreUnreadable(f"the ML Metadata store {path} cannot be read: {_why(str(exc))}. tfxd left it as "
                              "it is") from None
    if damage:
        raise StoreUnreadable(f"the ML Metadata store {path} cannot be read: {_why(damage)}. tfxd left it as it is")


def _damage(path: str) -> str | None:
    """What SQLite's own check finds wrong in the file, page by page (`PRAGMA quick_check`: every page and
    record, without the slower index cross-checks), read-only; None when it is whole."""
    try:
        connection = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        found = [row[0] for row in connection.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        return str(exc)  # "database disk image is malformed", "file is not a database"
    finally:
        connection.close()
    return None if found == ["ok"] else "database disk image is malformed: " + "; ".join(found)


def _why(error: str) -> str:
    moved = (f"move it aside (mv {FILE_NAME} {FILE_NAME}.old): the next run starts a new record, and runs "
             "nothing from the cache")
    if newer := _NEWER.search(error):
        return (f"a newer ML Metadata wrote it (schema version {newer.group(1)}; this tfxd's reads "
                f"{newer.group(2)}); run this root with the tfxd (or TFX) version that wrote it, or {moved}")
    if older := _OLDER.search(error):
        return (f"an older ML Metadata wrote it (schema version {older.group(1)}; this tfxd's reads "
                f"{older.group(2)}, and does not migrate a store in place); back it up and migrate it with "
                "ml_metadata's MetadataStore(config, enable_upgrade_migration=True), or " + moved)
    if "malformed" in error or "not a database" in error:
        return f"the file is damaged ({'truncated or corrupt' if 'malformed' in error else 'not an SQLite database'})"\
            f"; restore it from a backup, or {moved}"
    return f"{error.split(' query:')[0]}; check the file's permissions and that no other program holds it, or {moved}"
