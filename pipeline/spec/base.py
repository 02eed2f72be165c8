"""What every spec section shares: the base model (unknown keys are errors, types are not coerced), the
forms of names and paths, and the component names the spec, the assembly and the runs use."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler

from tfxd import expressions
from tfxd.pipeline.spec.errors import Problems

# the components of every pipeline, in order: names in `tfxd run --to`, `resources` and summaries
COMPONENTS = ("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator",
              "Transform", "Trainer", "Evaluator", "Pusher")
Component = Literal[COMPONENTS]  # type: ignore[valid-type]

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,127}$"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
DOTTED = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
SPLIT_NAME = r"^[a-z][a-z0-9_]*$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$"

PositiveInt = Annotated[int, Field(ge=1)]


class Section(BaseModel):
    """Base of every spec model: unknown keys are errors, types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def _explicit(self, key: str) -> bool:
        return key in self.model_fields_set


def drop_keys(handler: SerializerFunctionWrapHandler, model: BaseModel, keys: set[str]) -> dict[str, Any]:
    """The model serialized without ``keys`` (options that do not apply to it, for `tfxd render`)."""
    data = handler(model)
    return {key: value for key, value in data.items() if key not in keys}


def check_expression(text: str, path: tuple[str, ...], problems: Problems) -> None:
    try:
        expressions.parse(text)
    except expressions.ExpressionError as exc:
        problems.add(path, f"{exc.message} (at column {exc.column} of the expression)",
                     "expressions use column names, numbers, + - * / %, comparisons, and/or/not and "
                     f"the functions {', '.join(expressions.FUNCTIONS)}")
