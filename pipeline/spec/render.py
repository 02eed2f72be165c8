"""Text forms of the spec: the resolved YAML (``tfxd render``) and the JSON Schema."""

from __future__ import annotations

import io
import json

from ruamel.yaml import YAML

from tfxd.pipeline.spec.document import Spec

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def to_yaml(spec: Spec) -> str:
    """The spec with every default filled in; loading it again gives the same spec."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = None
    yaml.width = 4096
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]  # keep the key order (ruamel: a bool)
    buffer = io.StringIO()
    yaml.dump(spec.model_dump(mode="json", by_alias=True), buffer)
    return buffer.getvalue()


def json_schema() -> str:
    """The JSON Schema of the spec, by pydantic from the models."""
    schema = {"$schema": SCHEMA_DIALECT, **Spec.model_json_schema(by_alias=True)}
    return json.dumps(schema, indent=2) + "\n"
