"""tfxd's ExampleGen driver on the local runners (LocalDagRunner, BeamDagRunner): TFX's file-based driver,
which resolves the input and fingerprints it before the cache is asked, with tfxd's span decision in
place of TFX's span resolution where `data.path` has spans (span_decision.py), so that the cache key
holds the spans read and their files. The compiled Kubeflow and Vertex files do not name it: TFX's
compiler gives every FileBasedExampleGen TFX's own driver as a Vertex hook, and the executor decides
the spans itself there."""

from __future__ import annotations

from typing import Any

from absl import logging
from tfx.components.example_gen import driver as example_gen_driver

from tfxd import reader_config
from tfxd.components.example_gen import span_decision
from tfxd.components.example_gen.records import InputError


class Driver(example_gen_driver.FileBasedDriver):
    def resolve_exec_properties(self, exec_properties: dict[str, Any], pipeline_info: Any,
                                component_info: Any) -> dict[str, Any]:
        if reader_config.of(exec_properties).spans:
            try:
                return span_decision.decide(exec_properties)
            except InputError as exc:  # the executor decides again and fails the component with it
                logging.warning("tfxd ExampleGen driver: %s", exc)
        return super().resolve_exec_properties(exec_properties, pipeline_info, component_info)
