"""The expression language of derived features and labels, checked without TensorFlow.

An expression is a Python expression restricted to column names, numbers,
strings, ``+ - * / %``, comparisons, ``and or not``, parentheses and the
functions in FUNCTIONS. It is parsed with ``ast``; anything else is refused
with the column of the offending token. The Transform compiles the same tree
into TensorFlow ops.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# name -> (min args, max args)
FUNCTIONS: dict[str, tuple[int, int]] = {
    "abs": (1, 1),
    "log": (1, 1),
    "exp": (1, 1),
    "sqrt": (1, 1),
    "min": (2, 2),
    "max": (2, 2),
    "where": (3, 3),
}
# the functions whose arguments are numbers (all but `where`, which picks between any two values)
NUMBER_FUNCTIONS = tuple(name for name in FUNCTIONS if name != "where")
BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod)
UNARY = (ast.USub, ast.UAdd, ast.Not)
COMPARE = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


@dataclass(frozen=True)
class ExpressionError(Exception):
    """What is wrong and the 1-based column inside the expression text."""

    message: str
    column: int

    def __str__(self) -> str:
        return f"column {self.column}: {self.message}"


def parse(text: str) -> ast.expr:
    """Parse and check ``text``; return its tree or raise ExpressionError."""
    if not text.strip():
        raise ExpressionError("the expression is empty", 1)
    if "\n" in text.strip():
        raise ExpressionError("an expression must fit on one line", text.index("\n") + 1)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"not a valid expression ({exc.msg})", exc.offset or 1) from None
    _check(tree.body)
    return tree.body


def columns(text: str) -> list[str]:
    """The column names an expression reads, in order of first use."""
    names: list[str] = []
    for node in ast.walk(parse(text)):
        if isinstance(node, ast.Name) and node.id not in FUNCTIONS and node.id not in names:
            names.append(node.id)
    return names


def _check(node: ast.AST) -> None:
    column = getattr(node, "col_offset", 0) + 1
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float, str)):
            raise ExpressionError(f"constant {node.value!r} is not a number or a string", column)
    elif isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise ExpressionError(f"{node.id!r} is a function: call it, e.g. {node.id}(x)", column)
        if node.id.startswith("__"):
            raise ExpressionError(f"name {node.id!r} is not allowed", column)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, BINARY):
        _check(node.left)
        _check(node.right)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, UNARY):
        _check(node.operand)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value)
    elif isinstance(node, ast.Compare) and all(isinstance(op, COMPARE) for op in node.ops):
        _check(node.left)
        for value in node.comparators:
            _check(value)
    elif isinstance(node, ast.Call):
        _check_call(node, column)
    else:
        raise ExpressionError(f"{_describe(node)} is not allowed in expressions", column)


def _check_call(node: ast.Call, column: int) -> None:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        called = node.func.id if isinstance(node.func, ast.Name) else None
        what = f"function {called!r}" if called else _describe(node.func)
        raise ExpressionError(f"{what} cannot be called; allowed: {', '.join(FUNCTIONS)}",
                              getattr(node.func, "col_offset", column - 1) + 1)
    if node.keywords:
        raise ExpressionError("keyword arguments are not allowed", node.keywords[0].value.col_offset + 1)
    low, high = FUNCTIONS[node.func.id]
    if not low <= len(node.args) <= high:
        raise ExpressionError(f"{node.func.id}() takes {low} argument{'s' if low > 1 else ''}, "
                              f"got {len(node.args)}", column)
    for arg in node.args:
        _check(arg)


_NAMES = {
    ast.Attribute: "attribute access (a.b)",
    ast.Subscript: "subscripting (x[...])",
    ast.Lambda: "lambda",
    ast.IfExp: "'x if c else y' (use where(c, x, y))",
    ast.ListComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.List: "a list",
    ast.Tuple: "a tuple",
    ast.Dict: "a dict",
    ast.Starred: "unpacking (*)",
    ast.NamedExpr: "assignment (:=)",
}


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.BinOp):
        return f"operator {type(node.op).__name__}"
    if isinstance(node, ast.Compare):
        return "this comparison (is / in)"
    return _NAMES.get(type(node), type(node).__name__)
