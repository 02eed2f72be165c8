"""The spec: its pydantic models (the single source of keys, defaults and the JSON Schema), YAML read
with positions, `--set` overrides, every problem located at file:line:col, and where a target puts
its files. Imports no TensorFlow: `tfxd validate` stays fast."""
