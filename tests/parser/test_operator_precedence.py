"""Expressions without parentheses mean what Spark's grammar makes of them after recsql parses
and renders them again. The oracle is Spark: the same SELECT evaluated from the user's text and
from recsql's rendering of it. sqlglot's own parser put `||` and every bitwise operator on one
level below `+`, so each expression below (found by the campaign at the end) came back grouped
otherwise and Spark computed another value."""

from __future__ import annotations

import os
import random

import pytest
import sqlglot

import recsql.parser.dialect  # noqa: F401  (registers the rasql dialect)

ROWS = "SELECT * FROM VALUES (3, 5, 7), (-2, 6, 1), (12, -9, 4) AS t(a, b, c)"
FOUND = [
    "3 | 3 + 1 >> c",
    "3 - + a | 2 << 1 * b",
    "1 | 2 >> b div 3",
    "3 + 1 | 2 % 2 << b",
    "2 & 2 << c + a || 3",
    "3 || c * 3 ^ 1 << 2",
    "1 || 1 | 2 << 3 ^ a",
    "c | 2 & 2 << 2 % c",
    "1 & c << 2",
    "b - - b & 1 << 2",
    "c << 1 || 1",
    "1 % a | 3 + 2 << b",
    "a >>> 1 | b",
]


def _select(expressions: list[str]) -> str:
    items = ", ".join(f"{e} AS v{i}" for i, e in enumerate(expressions))
    return f"SELECT {items} FROM ({ROWS}) AS t"


def _same_as_spark(spark, expressions: list[str]) -> None:
    text = _select(expressions)
    rendered = sqlglot.parse_one(text, read="rasql").sql("rasql")
    want = spark.sql(text).collect()
    got = spark.sql(rendered).collect()
    for i, expression in enumerate(expressions):
        assert [r[i] for r in got] == [r[i] for r in want], (expression, rendered)


def test_operators_found_grouped_otherwise_mean_what_spark_makes_of_them(spark):
    _same_as_spark(spark, FOUND)


@pytest.mark.fuzz
def test_random_operator_chains_mean_what_spark_makes_of_them(spark):
    """RECSQL_FUZZ_EXAMPLES chains of integer, string and boolean operators; those Spark itself
    rejects (types, overflow) are skipped."""
    rng = random.Random(0)
    ops = ["+", "-", "*", "|", "&", "^", "<<", ">>", ">>>", "%", "div", "||", "=", "<", "AND", "OR"]
    leaves = ["a", "b", "c", "1", "2", "3"]
    checked = 0
    for _ in range(int(os.environ.get("RECSQL_FUZZ_EXAMPLES", "20000")) // 10):
        parts = [rng.choice(leaves)]
        for _ in range(rng.randint(2, 4)):
            if rng.random() < 0.15:
                parts.append(rng.choice(["-", "~", "NOT "]))
            parts += [rng.choice(ops), rng.choice(leaves)]
        expression = " ".join(parts)
        try:
            spark.sql(_select([expression])).collect()
        except Exception:  # noqa: BLE001 - Spark rejects it: nothing to compare
            continue
        _same_as_spark(spark, [expression])
        checked += 1
    assert checked > 0
