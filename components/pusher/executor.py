"""Pusher executor: TFX's, then the evaluation that blessed the model written beside the pushed version
(tfxd.pushed.EVALUATION_FILE, in the SavedModel's assets.extra, which TF Serving ignores): with the data
record and the training report the Trainer left there, a version on the serving path says what it was trained
on, how and how it scored, after the pipeline root's runs are gone. Written after saved_model.pb, as the
version is complete before it; a reader takes its absence as nothing said.

Where the model and a copy of it are both on Cloud Storage, TFX's copies (io_utils.copy_dir and copy_file)
are made by Cloud Storage itself, an object a request (tfxd.bucket_objects; patch
tfx.pushes_copied_in_the_bucket): the same objects, saved_model.pb last as TFX copies it."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence

from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from tfxd import bucket_objects, files, keys, patches, pushed


class Executor(tfx_pusher.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        files.empty_outputs(output_dict)  # a retry in place meets the first attempt's copy of the model
        with copies_in_the_bucket():
            super().Do(input_dict, output_dict, exec_properties)
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if model_push.get_int_custom_property("pushed") != 1:
            return
        blessing = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_BLESSING_KEY])
        destination = model_push.get_string_custom_property("pushed_destination")
        evaluation = {"blessed": True, "metrics": json.loads(blessing.get_string_custom_property(keys.METRICS_PROPERTY)
                                                             or "{}"),
                      "model": blessing.get_string_custom_property("current_model") or None,
                      "baseline": blessing.get_string_custom_property("baseline_model") or None,
                      "pushed_model": model_push.uri}
        fileio.makedirs(os.path.join(destination, pushed.EXTRA_DIR))
        files.write_atomic(os.path.join(destination, pushed.EVALUATION_FILE), json.dumps(evaluation, indent=2, sort_keys=True))


@contextlib.contextmanager
def copies_in_the_bucket() -> Iterator[None]:
    """TFX's io_utils.copy_dir and copy_file, made by Cloud Storage where both ends are gs:// paths."""
    with patches.applied("tfx.pushes_copied_in_the_bucket", _folder_copy(io_utils.copy_dir), "copy_dir"), \
            patches.applied("tfx.pushes_copied_in_the_bucket", _file_copy(io_utils.copy_file), "copy_file"):
        yield


def _on_buckets(*paths: str) -> bool:
    return all(path.startswith("gs://") for path in paths)


def _folder_copy(tfx_copy_dir: Callable[..., None]) -> Callable[..., None]:
    def copy_dir(src: str, dst: str, allow_regex_patterns: Sequence[str] = (),
                 deny_regex_patterns: Sequence[str] = ()) -> None:
        if not _on_buckets(src, dst):
            return tfx_copy_dir(src, dst, allow_regex_patterns, deny_regex_patterns)
        allow = [re.compile(pattern) for pattern in allow_regex_patterns]
        deny = [re.compile(pattern) for pattern in deny_regex_patterns]

        def keep(uri: str) -> bool:  # io_utils.copy_dir's should_copy, on the object's path
            return (not allow or any(p.search(uri) for p in allow)) and not any(p.search(uri) for p in deny)

        bucket_objects.copy_folder(src.rstrip("/"), dst.rstrip("/"), keep)
        return None

    return copy_dir


def _file_copy(tfx_copy_file: Callable[..., None]) -> Callable[..., None]:
    def copy_file(src: str, dst: str, overwrite: bool = False) -> None:
        if not _on_buckets(src, dst):
            return tfx_copy_file(src, dst, overwrite)
        bucket_objects.copy(src, dst, overwrite=overwrite)
        return None

    return copy_file
