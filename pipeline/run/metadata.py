"""The local ML Metadata store of a pipeline root: where it is and how to open it, read-only for
reading back what a run did, read-write for the runner and for settling what a dead run left."""

from __future__ import annotations

import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd

FILE_NAME = "metadata.sqlite"


def metadata_path(root: str) -> str:
    return os.path.join(root, FILE_NAME)


def connection_config(root: str, readonly: bool = False) -> mlmd.ConnectionConfig:
    """The SQLite connection config of ``root``'s store (read-write: created when missing)."""
    config = mlmd.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path(root)
    config.sqlite.connection_mode = (mlmd.SqliteMetadataSourceConfig.READONLY if readonly
                                     else mlmd.SqliteMetadataSourceConfig.READWRITE_OPENCREATE)
    return config


def open_store(root: str, readonly: bool = True) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(connection_config(root, readonly))
