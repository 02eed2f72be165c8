"""A root whose ML Metadata store cannot be read (a truncated file, one that is not a database, a schema
another ML Metadata version wrote) stops `tfxd run` with the path, the reason and what to do, before
anything is written; the store is left byte for byte as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import BASE_SPEC, write_spec
from tests.pipeline.run.test_run_taxi import tfxd


def _damage(store: Path, how: str) -> None:
    if how == "damaged-past-its-first-pages":  # what a read of the types (its first pages) never sees
        from ml_metadata.proto import metadata_store_pb2 as mlmd

        from tfxd.pipeline.run.metadata import open_store

        written = open_store(str(store.parent), readonly=False)
        type_id = written.put_artifact_type(mlmd.ArtifactType(name="Examples"))
        written.put_artifacts([mlmd.Artifact(type_id=type_id, uri=f"/runs/{i}/" * 8) for i in range(3000)])
        data = bytearray(store.read_bytes())
        page = len(data) - 5 * 4096  # a page of artifacts near the end of the file
        data[page:page + 4096] = b"\x99" * 4096
        store.write_bytes(bytes(data))
        assert open_store(str(store.parent), readonly=True).get_context_types() == []  # the old check passed
    elif how == "truncated":
        store.write_bytes(store.read_bytes()[:1000])
    elif how == "not-a-database":
        store.write_bytes(b"these are not the bytes of a database\n" * 50)
    else:
        with sqlite3.connect(store) as connection:
            connection.execute("UPDATE MLMDEnv SET schema_version = ?", (99 if how == "newer" else 5,))


@pytest.mark.reliability("environment fault")
@pytest.mark.parametrize(("how", "why"), [
    ("truncated", "the file is damaged (truncated or corrupt); restore it from a backup, or move it aside"),
    ("damaged-past-its-first-pages", "the file is damaged (truncated or corrupt); restore it from a backup"),
    ("not-a-database", "the file is damaged (not an SQLite database)"),
    ("newer", "a newer ML Metadata wrote it (schema version 99; this tfxd's reads 10); run this root with the "
              "tfxd (or TFX) version that wrote it"),
    ("older", "an older ML Metadata wrote it (schema version 5; this tfxd's reads 10, and does not migrate a "
              "store in place)"),
])
def test_an_unreadable_store_stops_the_run_and_is_left_as_it_is(project, how, why):
    from tfxd.pipeline.run.metadata import open_store

    write_spec(project, BASE_SPEC)
    root = project / "tfxd-runs" / "demo"
    root.mkdir(parents=True)
    open_store(str(root), readonly=False).get_context_types()  # a real store, as a first run leaves it
    store = root / "metadata.sqlite"
    _damage(store, how)
    before = store.read_bytes()
    result = tfxd("run", "spec.yaml", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert f"error: the ML Metadata store {store} cannot be read: {why}" in message
    assert "mv metadata.sqlite metadata.sqlite.old" in message and "tfxd left it as it is" in message
    assert "Traceback" not in result.stderr
    assert store.read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["metadata.sqlite", "tfxd-run.lock"]  # no run began
