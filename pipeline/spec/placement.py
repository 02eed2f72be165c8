"""Where a pipeline runs decides where its files are.

Locally, paths in the spec are relative to the spec's folder. On Kubeflow and Vertex the same project
is copied into the pipeline image at tfxd.keys.IMAGE_PROJECT_DIR (kubeflow/Dockerfile), so a relative path becomes
a path inside the image; the pipeline root and the push destination move to the target's bucket.
`problems` says what cannot work on a cluster before anything is compiled.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from tfxd import keys
from tfxd.files import is_uri
from tfxd.pipeline.spec.errors import Problems
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.targets import TARGET_MODELS


@dataclass(frozen=True)
class Placement:
    loaded: LoadedSpec
    target: str = "local"  # a name of pipeline.spec.targets.TARGETS

    @property
    def on_cluster(self) -> bool:
        return TARGET_MODELS[self.target].ON_CLUSTER

    def path(self, spec_path: str) -> str:
        """A path from the spec, as the pipeline's processes see it."""
        return self.where(self.loaded.resolve(spec_path))

    def where(self, local_path: str) -> str:
        """A local absolute path under the spec's folder, as the pipeline's processes see it."""
        if not self.on_cluster or is_uri(local_path):
            return local_path
        relative = os.path.relpath(local_path, self.loaded.base_dir)
        if relative == ".":
            return keys.IMAGE_PROJECT_DIR
        return posixpath.join(keys.IMAGE_PROJECT_DIR, *relative.split(os.sep))

    def cluster_root(self) -> str | None:
        """The target's bucket folder for this pipeline (None locally, or when the spec names none)."""
        spec = self.loaded.spec
        section = spec.targets.section(self.target)
        base = section.bucket(spec.root) if section is not None else None
        return posixpath.join(base, spec.name) if base else None

    def pipeline_root(self) -> str:
        if self.on_cluster:
            return posixpath.join(self.cluster_root() or "", "pipeline")
        return os.path.join(self.loaded.resolve(self.loaded.spec.root or ""), "pipeline")

    def history_page(self) -> str:
        """history.html on the cluster: beside the pipeline root, as a local run's is beside its runs/."""
        return posixpath.join(self.cluster_root() or "", keys.HISTORY_PAGE)

    def push_to(self) -> str:
        spec = self.loaded.spec
        push = spec.push.to or ""
        if not self.on_cluster or is_uri(push):
            return self.loaded.resolve(push)
        return posixpath.join(self.cluster_root() or "", "serving")

    def problems(self, problems: Problems) -> None:
        """What the target cannot reach: local files outside the project, a root that is not a bucket."""
        if not self.on_cluster:
            return
        spec = self.loaded.spec
        target = self.target
        for path, value in spec.read_paths().items():
            if value is None or value == "infer" or is_uri(value):
                continue
            inside = os.path.relpath(self.loaded.resolve(value), self.loaded.base_dir)
            if os.path.isabs(value) or inside.startswith(".."):
                problems.add(path, f"{value!r} is outside the spec's folder, which is all the pipeline image "
                             f"holds for target {target}",
                             "move it under the spec's folder, or use a gs:// path")
        if self.cluster_root() is None:
            problems.add(("targets", target, "root"), f"the {target} target needs a pipeline root its pods can "
                         "write (TFX writes artifacts with TensorFlow's file system)",
                         f"add targets.{target}.root: gs://bucket/folder")
        default_push = posixpath.join(spec.root or "", "serving")
        if spec.push.to and not is_uri(spec.push.to) and spec.push.to != default_push:
            problems.add(("push", "to"), f"push.to {spec.push.to!r} is a local folder, which a {target} "
                         "pipeline cannot write", "use a gs:// folder, or leave push.to out (the default is "
                         "<target root>/<name>/serving)")
