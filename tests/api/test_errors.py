"""One test per error class through the public API on Spark; no raw Py4J text ever."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import recsql
from recsql import RecSQLAnalysisError, RecSQLError, RecSQLExecutionError, RecSQLParseError

EDGE = [(1, 2, 3), (2, 3, 4), (3, 1, 1)]
GOOD = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""

RAW_MARKERS = ("py4j", "Py4J", "Traceback", "org.apache.spark.sql.catalyst", "\tat ", "JavaObject",
               "SQLSTATE", "RepartitionByExpression", "LogicalRDD")


@pytest.fixture(autouse=True)
def edge(view):
    return view("edge", EDGE, "Src int, Dst int, Cost int")


def run_error(spark, q, cls=RecSQLError, **kw) -> RecSQLError:
    with pytest.raises(cls) as info:
        recsql.sql(q, spark=spark, **kw).collect()
    err = info.value
    assert isinstance(err, RecSQLError)
    text = str(err)
    for marker in RAW_MARKERS:
        assert marker not in text, f"raw Spark/Py4J text {marker!r} in: {text}"
    assert err.condition and err.message
    return err


def assert_points_at(err: RecSQLError, q: str, needle: str):
    """err.line/err.pos locate `needle` (its first occurrence) in q, and the caret shows it."""
    offset = q.index(needle)
    line = q.count("\n", 0, offset) + 1
    pos = offset - (q.rfind("\n", 0, offset) + 1)
    assert err.line == line, (err.line, line, str(err))
    assert pos <= err.pos <= pos + len(needle), (err.pos, pos, str(err))
    text = str(err)
    assert "== SQL ==" in text
    lines = text.splitlines()
    i = lines.index(q.splitlines()[line - 1])
    assert lines[i + 1].startswith("-" * err.pos + "^")


def test_parse_error_line_pos_caret(spark):
    q = GOOD.replace("SELECT edge.Dst, path.Cost", "SELECT edge.Dst path.Cost")
    err = run_error(spark, q, RecSQLParseError)
    assert err.line == 2
    assert err.pos is not None
    assert "== SQL ==" in str(err) and "^" in str(err)


def test_parse_error_without_with_clause_keeps_position(spark):
    q = "SELECT Src,\n  FROM edge WHERE"
    err = run_error(spark, q, RecSQLParseError)
    assert err.line is not None and err.pos is not None


def test_unknown_table_with_suggestion(spark):
    q = GOOD.replace("FROM path, edge", "FROM path, edges")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "TABLE_OR_VIEW_NOT_FOUND"
    assert "`edges`" in err.message and "`edge`" in err.message
    assert_points_at(err, q, "edges")


def test_unknown_table_in_final_query(spark):
    q = GOOD.replace("SELECT Dst, Cost FROM path", "SELECT Dst, Cost FROM pth")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert "`pth`" in err.message and "`path`" in err.message


def test_unknown_column_of_recursive_cte_with_suggestion(spark):
    q = GOOD.replace("path.Cost + edge.Cost", "path.Cst + edge.Cost")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "RECSQL_UNKNOWN_COLUMN"
    assert "`Cst`" in err.message and "`Cost`" in err.message
    assert_points_at(err, q, "path.Cst")


def test_unknown_column_of_base_table_in_recursive_branch(spark):
    q = GOOD.replace("path.Dst = edge.Src", "path.Dst = edge.Sr")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert "`Sr`" in err.message and "Src" in err.message


def test_unknown_column_in_base_branch(spark):
    q = """WITH recursive tc (X, Y) AS (SELECT Src, Dstt FROM edge)
      UNION (SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src)
    SELECT X, Y FROM tc"""
    err = run_error(spark, q, RecSQLAnalysisError)
    assert "Dstt" in err.message and "Dst" in err.message


def test_unknown_column_in_final_query(spark):
    q = GOOD.replace("SELECT Dst, Cost FROM path", "SELECT Dst, Costs FROM path")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert "Costs" in err.message and "Cost" in err.message


def test_head_branch_mismatch(spark):
    q = GOOD.replace("(SELECT 1, 0)", "(SELECT 1, 0, 2)")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "RECSQL_HEAD_BRANCH_MISMATCH"
    assert "Branch 1" in err.message and "path" in err.message
    assert "Dst" in err.message and "Cost" in err.message


def test_a_star_branch_of_the_wrong_width_points_at_the_branch(spark):
    """`edge.*` is three columns only once typed (the executor's check, not the planner's)."""
    q = GOOD.replace("SELECT edge.Dst, path.Cost + edge.Cost FROM", "SELECT edge.* FROM")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "RECSQL_HEAD_BRANCH_MISMATCH"
    assert "yields 3 column(s) but the head has 2" in err.message
    assert_points_at(err, q, "edge.*")


def test_unsupported_head_aggregate_avg(spark):
    q = GOOD.replace("min() AS Cost", "avg() AS Cost")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "RECSQL_UNSUPPORTED_HEAD_AGGREGATE"
    assert "avg()" in err.message and "pre-mappable" in err.message
    assert_points_at(err, q, "avg()")


def test_aggregated_column_as_join_key(spark):
    q = GOOD.replace("path.Dst = edge.Src", "path.Cost = edge.Src")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "RECSQL_AGGREGATE_AS_KEY"
    assert "Cost" in err.message and "section 3" in err.message
    assert_points_at(err, q, "path.Cost = ")


@pytest.mark.parametrize("branch,what", [
    ("SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src LIMIT 3", "LIMIT"),
])
def test_limit_in_recursive_branch(spark, branch, what):
    q = f"WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)\nUNION ({branch})\nSELECT * FROM path"
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "RECSQL_FORBIDDEN_IN_RECURSION"
    assert what in err.message
    assert err.line == 2


def test_negation_over_own_group(spark):
    q = """WITH RECURSIVE r (X) AS (SELECT 1 UNION
      SELECT edge.Dst FROM r, edge WHERE r.X = edge.Src
        AND NOT EXISTS (SELECT 1 FROM r AS q WHERE q.X = edge.Dst))
    SELECT X FROM r"""
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "RECSQL_NONMONOTONE_NEGATION"
    assert err.line == 3


def test_aggregate_with_union_all(spark):
    q = GOOD.replace(")\n  UNION (", ")\n  UNION ALL (")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert "UNION ALL" in err.message


def test_max_iterations_is_an_execution_error(spark):
    q = "WITH RECURSIVE c (N) AS (SELECT 1 UNION ALL SELECT N + 1 FROM c) SELECT * FROM c"
    err = run_error(spark, q, RecSQLExecutionError, conf={"spark.recsql.maxIterations": 3})
    assert "spark.recsql.maxIterations" in err.message


def test_type_mismatch_in_branch(spark):
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
      UNION (SELECT edge.Dst, array(path.Cost) FROM path, edge WHERE path.Dst = edge.Src)
    SELECT Dst, Cost FROM path"""
    run_error(spark, q, RecSQLAnalysisError)


# Spark's analysis errors that name an expression, an ambiguous column or an unknown function,
# or quote a part of the query: recsql ran its own rendering of the query, so Spark's position is
# in text the user never wrote;
# the caret points at what Spark names, found in the user's text (the needle's place, by hand).
LOCATED = [
    ("DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES", GOOD.replace("path.Dst = edge.Src", "path.Dst = map(1, 2)"),
     "path.Dst = map(1, 2"),
    ("DATATYPE_MISMATCH.FILTER_NOT_BOOLEAN", GOOD.replace("path.Dst = edge.Src", "(path.Cost + 1)"),
     "path.Cost + 1)"),
    ("AMBIGUOUS_REFERENCE", GOOD.replace("SELECT edge.Dst,", "SELECT Dst,"), "Dst, path.Cost"),
    ("AMBIGUOUS_REFERENCE", GOOD.replace("SELECT Dst, Cost FROM path", "SELECT Dst, Cost FROM path, edge"),
     "Dst, Cost FROM path, edge"),
    ("DATATYPE_MISMATCH.INVALID_ORDERING_TYPE", GOOD + "\nWHERE map(1, 2) = map(2, 3)", "map(1, 2) = map"),
    ("UNRESOLVED_ROUTINE", GOOD.replace("SELECT edge.Dst,", "SELECT nofn(edge.Dst),"), "nofn("),
    # located by the text Spark quotes from recsql's rendering of the final query
    ("NESTED_AGGREGATE_FUNCTION", GOOD.replace("SELECT Dst, Cost FROM path", "SELECT max(sum(Cost)) FROM path"),
     "sum(Cost)"),
    ("GROUP_BY_POS_OUT_OF_RANGE", GOOD + " GROUP BY 5", "5"),
    ("MISSING_AGGREGATION", GOOD.replace("SELECT Dst, Cost FROM path", "SELECT Dst, count(*) FROM path GROUP BY Cost"),
     "Dst, count"),
    ("INVALID_WHERE_CONDITION", GOOD + " WHERE max(Cost) > 1", "max(Cost) > 1"),
    ("WINDOW_FUNCTION_FRAME_NOT_ORDERED",
     GOOD.replace("SELECT Dst, Cost FROM path", "SELECT row_number() OVER () FROM path"), "row_number()"),
]


@pytest.mark.parametrize("condition,q,needle", LOCATED, ids=[c for c, _, _ in LOCATED])
def test_type_and_ambiguity_errors_point_at_the_users_text(spark, condition, q, needle):
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == condition, str(err)
    assert_points_at(err, q, needle)


def test_a_failure_to_find_the_place_still_reports_sparks_error(spark, monkeypatch):
    """Finding the place is a courtesy: if it fails, the user still gets Spark's error."""
    from recsql.executor.loop import spark_sql

    def broken(*args):
        raise RuntimeError("a bug in the locator")

    monkeypatch.setattr(spark_sql, "_locate_expression", broken)
    q = GOOD.replace("path.Dst = edge.Src", "path.Dst = map(1, 2)")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES"
    assert (err.line, err.pos) == (None, None)


def test_an_expression_written_twice_gets_no_caret(spark):
    """Spark names `(Dst = map(1, 2))` without saying which of the two: no caret that may mislead."""
    q = GOOD.replace("path.Dst = edge.Src", "(path.Dst = map(1, 2) OR path.Dst = map(1, 2))")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition == "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES"
    assert (err.line, err.pos) == (None, None), str(err)


def test_numeric_types_widen_as_in_union(spark):
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
      UNION (SELECT edge.Dst, path.Cost + edge.Cost * 0.5D FROM path, edge WHERE path.Dst = edge.Src)
    SELECT Dst, Cost FROM path"""
    df = recsql.sql(q, spark=spark)
    assert dict(df.dtypes)["Cost"] == "double"
    assert sorted(tuple(r) for r in df.collect()) == [(1, 0.0), (2, 1.5), (3, 3.5)]


def test_error_hierarchy():
    for cls in (RecSQLParseError, RecSQLAnalysisError, RecSQLExecutionError):
        assert issubclass(cls, RecSQLError)
    err = RecSQLAnalysisError("boom", line=1, pos=2, sql="SELECT x")
    assert (err.line, err.pos, err.message) == (1, 2, "boom")
    assert str(err).startswith("[RECSQL_ANALYSIS_ERROR] boom (line 1, pos 2)")


# Runtime failures keep Spark's condition and get advice only where it is true (a division by
# zero once came out as an "integer overflow, cast to DECIMAL" error).
RUNTIME = [
    ("path.Cost / (edge.Cost - edge.Cost)", "DIVIDE_BY_ZERO", "try_divide", "DECIMAL"),
    ("path.Cost % (edge.Cost - edge.Cost)", "REMAINDER_BY_ZERO", "try_mod", "DECIMAL"),
    ("path.Cost + CAST(concat('x', edge.Cost) AS INT)", "CAST_INVALID_INPUT", "try_cast", "DECIMAL"),
    ("path.Cost + 2147483000 * edge.Cost", "ARITHMETIC_OVERFLOW", "DECIMAL(38, 0)", None),
]


@pytest.mark.parametrize("expression, condition, advice, false_advice", RUNTIME)
def test_runtime_failure_keeps_sparks_condition(spark, expression, condition, advice, false_advice):
    q = f"""WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
      UNION (SELECT edge.Dst, {expression} FROM path, edge WHERE path.Dst = edge.Src)
    SELECT Dst, Cost FROM path"""
    err = run_error(spark, q, RecSQLExecutionError)
    assert err.condition == condition
    assert err.sqlstate and len(err.sqlstate) == 5
    text = str(err)
    assert "CTE `path`" in text and "iteration 1" in text
    assert advice in text
    if false_advice:
        assert false_advice not in text


def test_spark_analysis_error_keeps_sparks_sqlstate(spark):
    # a recursive branch naming a column that does not exist: Spark's UNRESOLVED_COLUMN, 42703
    q = GOOD.replace("edge.Cost FROM", "edge.Weight FROM")
    err = run_error(spark, q, RecSQLAnalysisError)
    assert err.condition.startswith("UNRESOLVED_COLUMN")
    assert err.sqlstate == "42703"


def test_the_users_own_spark_errors_stay_spark_errors_after_recsql():
    """recsql silences pyspark's error logs while it plans; pyspark's loggers must stay pyspark's.
    A plain `logging` logger made under their names first turned every later analysis error of the
    user's own `spark.sql` into `TypeError: Logger._log() got an unexpected keyword argument
    'errorClass'`. In a fresh interpreter: no earlier error of the suite made the loggers."""
    script = textwrap.dedent("""
        from pyspark.logger import PySparkLogger
        from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs
        with quiet_pyspark_error_logs():
            pass
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            # as pyspark logs an AnalysisException (pyspark/errors/exceptions/base.py)
            PySparkLogger.getLogger(name).exception("an error", errorClass="SOME_ERROR")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
