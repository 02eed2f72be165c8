"""The expression language is parsed with ast and refuses everything outside it."""

from __future__ import annotations

import pytest

from tfxd import expressions


@pytest.mark.parametrize("text", ["tips > fare * 0.2", "fare / (trip_miles + 1)", "where(a > 0, log(a), 0)",
                                  "not (a == 'x') and b % 2 != 0", "max(a, b) - min(a, 1) + sqrt(abs(c))",
                                  "-x", "exp(x) <= 3"])
def test_allowed(text):
    expressions.parse(text)


@pytest.mark.parametrize(("text", "column", "needle"), [
    ("__import__('os')", 1, "cannot be called"),
    ("a.b", 1, "attribute access"),
    ("x[0]", 1, "subscripting"),
    ("lambda: 1", 1, "lambda"),
    ("a + open('f')", 5, "function 'open' cannot be called"),
    ("a if b else c", 1, "use where"),
    ("a ** 2", 1, "operator Pow"),
    ("a in b", 1, "is / in"),
    ("log(a, b)", 1, "takes 1 argument"),
    ("a + * b", 5, "not a valid expression"),
    ("", 1, "empty"),
    ("log", 1, "is a function"),
    ("True and a", 1, "not a number or a string"),
])
def test_refused_with_column(text, column, needle):
    with pytest.raises(expressions.ExpressionError) as info:
        expressions.parse(text)
    assert info.value.column == column
    assert needle in info.value.message


def test_columns_in_order():
    assert expressions.columns("where(tips > fare * 0.2, tips, fare + x)") == ["tips", "fare", "x"]
