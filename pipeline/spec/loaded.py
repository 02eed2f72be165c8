"""A valid spec with the file it came from: relative paths resolve against the spec's folder, and the
local data it names is looked at once and carried (validation, the assembly and the runner share it)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from tfxd.files import is_uri
from tfxd.pipeline.spec import data_files
from tfxd.pipeline.spec.document import Spec


@dataclass(frozen=True)
class LoadedSpec:
    spec: Spec
    path: str

    @property
    def base_dir(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    def resolve(self, path: str) -> str:
        """A path from the spec, made absolute against the spec's folder (URIs are kept)."""
        if is_uri(path) or os.path.isabs(path):
            return path
        return os.path.normpath(os.path.join(self.base_dir, path))

    @functools.cached_property
    def data_files(self) -> data_files.DataFiles:
        """The local files `data` names and their columns, found on first use."""
        return data_files.find(self.spec.data, self.resolve)
