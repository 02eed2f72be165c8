"""Compile the spec's expression language (pipeline.expressions) into TensorFlow ops.

Numbers are float64 with NaN where a value is missing, so a comparison with a
missing value is False (as in TFX's own taxi example, where a missing fare
gives the label 0); strings are tf.string with "" where missing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import cast

import tensorflow as tf

from tfxd import expressions

_BINARY = {ast.Add: tf.add, ast.Sub: tf.subtract, ast.Mult: tf.multiply, ast.Div: tf.math.divide,
           ast.Mod: tf.math.floormod}
_COMPARE = {ast.Eq: tf.equal, ast.NotEq: tf.not_equal, ast.Lt: tf.less, ast.LtE: tf.less_equal,
            ast.Gt: tf.greater, ast.GtE: tf.greater_equal}
_FUNCTIONS: dict[str, Callable[..., tf.Tensor]] = {
    "abs": tf.abs, "log": tf.math.log, "exp": tf.exp, "sqrt": tf.sqrt,
    "min": tf.minimum, "max": tf.maximum,
    "where": lambda cond, a, b: tf.where(_bool(cond), *_common(a, b)),
}


def compile_expression(text: str, column: Callable[[str], tf.Tensor]) -> tf.Tensor:
    """Build the ops of ``text``; ``column(name)`` gives the dense tensor of a column."""
    return _build(expressions.parse(text), column)


def _build(node: ast.AST, column: Callable[[str], tf.Tensor]) -> tf.Tensor:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, str):
            return tf.constant(value.encode("utf-8"), dtype=tf.string)
        return tf.constant(float(cast(float, value)), dtype=tf.float64)  # tfxd.expressions admits numbers only
    if isinstance(node, ast.Name):
        return column(node.id)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](*(_number(_build(side, column)) for side in (node.left, node.right)))
    if isinstance(node, ast.UnaryOp):
        operand = _build(node.operand, column)
        if isinstance(node.op, ast.Not):
            return tf.logical_not(_bool(operand))
        return -_number(operand) if isinstance(node.op, ast.USub) else _number(operand)
    if isinstance(node, ast.BoolOp):
        combine = tf.logical_and if isinstance(node.op, ast.And) else tf.logical_or
        values = [_bool(_build(value, column)) for value in node.values]
        result = values[0]
        for value in values[1:]:
            result = combine(result, value)
        return result
    if isinstance(node, ast.Compare):
        left = _build(node.left, column)
        result = None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _build(right_node, column)
            step = _COMPARE[type(op)](*_common(left, right))
            result = step if result is None else tf.logical_and(result, step)
            left = right
        return result
    if isinstance(node, ast.Call):
        args = [_build(arg, column) for arg in node.args]
        name = node.func.id  # type: ignore[attr-defined]
        if name == "where":
            return _FUNCTIONS[name](*args)
        return _FUNCTIONS[name](*(_number(arg) for arg in args))
    raise ValueError(f"cannot compile {ast.dump(node)}")  # parse() refuses everything else


def _number(tensor: tf.Tensor) -> tf.Tensor:
    if tensor.dtype == tf.string:
        raise ValueError("arithmetic on a string column; compare it (== 'x') or use it in a vocabulary feature")
    return tf.cast(tensor, tf.float64)


def _bool(tensor: tf.Tensor) -> tf.Tensor:
    if tensor.dtype == tf.bool:
        return tensor
    return tf.not_equal(_number(tensor), 0.0)


def _common(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Bring two operands to one dtype (numbers to float64; strings stay strings)."""
    if a.dtype == tf.string or b.dtype == tf.string:
        if a.dtype != b.dtype:
            raise ValueError("comparing a string with a number")
        return a, b
    return _number(a), _number(b)
