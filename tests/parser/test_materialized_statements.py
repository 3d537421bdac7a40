"""The materialized view statements as the dialect reads them (no Spark): which the statement
layer's materialized view handler takes, and `REFRESH ... FULL` (Databricks' spelling)."""

from __future__ import annotations

import pytest

from recsql.parser import parse_statement
from recsql.statements import materialized


@pytest.mark.parametrize("text", [
    "REFRESH MATERIALIZED VIEW v",
    "REFRESH MATERIALIZED VIEW db.v FULL",
])
def test_refresh_round_trip(text):
    assert parse_statement(text).expression.sql("rasql") == text


@pytest.mark.parametrize("text, taken, full", [
    ("CREATE MATERIALIZED VIEW v AS WITH recursive r (x) AS (SELECT 1) UNION "
     "(SELECT x + 1 FROM r WHERE x < 3) SELECT x FROM r", True, False),
    ("REFRESH MATERIALIZED VIEW v", True, False),
    ("REFRESH MATERIALIZED VIEW v FULL", True, True),
    ("EXPLAIN REFRESH MATERIALIZED VIEW v FULL", True, True),
    ("DROP MATERIALIZED VIEW IF EXISTS v", True, False),
    ("CREATE VIEW v AS SELECT 1", False, False),
    ("DROP VIEW v", False, False),
    ("REFRESH TABLE t", False, False),
    ("EXPLAIN CREATE MATERIALIZED VIEW v AS SELECT 1", False, False),
])
def test_which_statements_the_handler_takes(text, taken, full):
    statement = parse_statement(text)
    assert materialized.takes(statement) is taken
    assert (statement.expression.args.get("mode") is not None) is full
