"""Where a replay keeps artifacts: the image's project and the buckets a compiled file names, mapped to
local folders (or, on a Cloud Storage emulator, the buckets left as they are); and the index of every
artifact replays under one root produced, which answers the resolver queries TFX's compiler writes (the
latest blessed model...) as Vertex answers them from ML Metadata."""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfxd import buckets, keys
from tfxd.files import write_json
from tfxd.kubeflow.replay.ir import Compiled, ReplayError, substitute

INDEX_FILE = "artifacts.json"
BUCKET_DIR = "bucket"
BUCKET_SCHEMES = ("gs", "s3")


@dataclass
class Localizer:
    """The image's project -> ``project_dir``; a bucket (`gs://B/...`) -> `<root>/bucket/B/...`, or left as
    it is (``keep_buckets``: a replay on the buckets themselves)."""

    project_dir: str
    root: str
    keep_buckets: bool = False
    seen: dict[str, str] = field(default_factory=dict)  # bucket URI prefix -> local folder

    _PROJECT = re.compile(re.escape(keys.IMAGE_PROJECT_DIR) + r"(?![\w.-])")
    _BUCKET = re.compile(r"\b(" + "|".join(BUCKET_SCHEMES) + r")://([A-Za-z0-9_.-]+)")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            value = self._PROJECT.sub(lambda _: self.project_dir.rstrip("/") or "/", value)
            return self._BUCKET.sub(self._bucket, value)
        if isinstance(value, list):
            return [self(item) for item in value]
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        return value

    def _bucket(self, match: re.Match) -> str:
        if self.keep_buckets:
            return match.group(0)
        local = os.path.join(self.root, BUCKET_DIR, match.group(2))
        self.seen[match.group(0)] = local
        return local

    def on_cluster(self, path: str | None) -> str | None:
        """A local path under a mapped bucket as the cluster would have it."""
        if not path:
            return None
        for uri, local in self.seen.items():
            if path == local or path.startswith(local + os.sep):
                return uri + path[len(local):].replace(os.sep, "/")
        return None


def writes_to_buckets(compiled: Compiled) -> bool:
    """Whether a replay writes to the buckets the file names: where a Cloud Storage emulator is named
    (STORAGE_EMULATOR_HOST) and every client reaches it (tfxd.buckets), as a cluster writes to its bucket;
    else buckets map to local folders (Localizer)."""
    root = compiled.pipeline_root or ""
    if not os.environ.get(buckets.EMULATOR_ENV) or not root.startswith("gs://"):
        return False
    try:
        buckets.check_emulator([root])
    except buckets.BucketsSplit as exc:
        raise ReplayError(str(exc)) from None
    return True


def runtime_artifact(record: dict[str, Any]) -> dict[str, Any]:
    """A RuntimeArtifact as the launcher passes it."""
    return {"name": record["name"], "type": {"schemaTitle": record["schemaTitle"]}, "uri": record["uri"],
            "metadata": record.get("metadata", {})}


class ArtifactIndex:
    """Every output artifact replays produced under a root, oldest first: what resolvers query."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, INDEX_FILE)
        self.records: list[dict[str, Any]] = []
        self._load()

    def _load(self) -> None:
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as handle:
                self.records = json.load(handle).get("artifacts", [])

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        self._load()  # another replay under the same root may have added some meanwhile
        record = {**record, "state": "LIVE", "order": len(self.records) + 1,
                  "created": datetime.datetime.now().isoformat(timespec="seconds")}
        self.records.append(record)
        write_json(self.path, {"artifacts": self.records}, indent=1, sort_keys=True)
        return record

    def find(self, **where: Any) -> dict[str, Any] | None:
        for record in reversed(self.records):
            if all(record.get(key) == value for key, value in where.items()):
                return record
        return None

    def query(self, pipeline: str, text: str, placeholders: Callable[[str], str | None]) -> list[dict[str, Any]]:
        """The artifacts of ``pipeline`` that a resolver filter selects, newest first."""
        tests = [clause(part, text, placeholders) for part in split_and(text)]
        return [record for record in reversed(self.records)
                if record.get("pipeline") == pipeline and all(test(record) for test in tests)]


def split_and(text: str) -> list[str]:
    """A filter's clauses: split at AND outside quoted strings."""
    parts, current = [], ""
    tokens = re.split(r'("(?:[^"\\]|\\.)*")', text)
    for token in tokens:
        if token.startswith('"') and token.endswith('"') and len(token) > 1:
            current += token
            continue
        pieces = re.split(r"\s+AND\s+", token)
        current += pieces[0]
        for piece in pieces[1:]:
            parts.append(current)
            current = piece
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def _string(text: str) -> str:
    return json.loads(text) if text.startswith('"') else text


_NUMBER = r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"


def clause(part: str, text: str, placeholders: Callable[[str], str | None]) -> Callable[[dict], bool]:
    """One `A AND B` clause of a Vertex artifact filter, in the forms TFX's compiler emits."""
    if match := re.fullmatch(r'schema_title\s*=\s*("(?:[^"\\]|\\.)*")', part):
        title = _string(match.group(1))
        return lambda record: record.get("schemaTitle") == title
    if match := re.fullmatch(r"state\s*=\s*([A-Z_]+)", part):
        state = match.group(1)
        return lambda record: record.get("state") == state
    if match := re.fullmatch(r'name\s*=\s*("(?:[^"\\]|\\.)*")', part):
        name = substitute(_string(match.group(1)), placeholders)
        return lambda record: name is not None and record.get("name") == name
    if match := re.fullmatch(rf"metadata\.([\w-]+)\.number_value\s*=\s*({_NUMBER})", part):
        key, number = match.group(1), float(match.group(2))
        return lambda record: (isinstance(record.get("metadata", {}).get(key), (int, float))
                               and not isinstance(record["metadata"][key], bool)
                               and float(record["metadata"][key]) == number)
    if match := re.fullmatch(r'metadata\.([\w-]+)\.string_value\s*=\s*("(?:[^"\\]|\\.)*")', part):
        key, wanted = match.group(1), _string(match.group(2))
        return lambda record: record.get("metadata", {}).get(key) == wanted
    if match := re.fullmatch(r"metadata\.([\w-]+)\.bool_value\s*=\s*(true|false)", part):
        key, flag = match.group(1), match.group(2) == "true"
        return lambda record: record.get("metadata", {}).get(key) is flag
    raise ReplayError(f"resolver filter {text!r}: replay does not support the clause {part!r} (it knows "
                      'schema_title="...", state=..., name="...", metadata.KEY.number_value=N, '
                      'metadata.KEY.string_value="...", metadata.KEY.bool_value=true|false, joined by AND)')
