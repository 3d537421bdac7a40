"""The public entry points: each reads its arguments as `SparkSession.sql` does, parses the
statement and hands it to the statement layer (`recsql.statements`), whose handlers chain the
stages bind -> plan -> analyse -> execute."""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import sqlglot
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.utils import get_lit_sql_str
from sqlglot import exp
from sqlglot.errors import ParseError

from recsql import statements
from recsql.errors import RecSQLError, RecSQLParseError
from recsql.executor.loop.session import resolve
from recsql.executor.loop.spark_sql import from_spark_error, quiet_pyspark_error_logs
from recsql.executor.loop.stats import IterationStats
from recsql.parser import DIALECT, CreateAggregate, parse_statement, split_statements
from recsql.settings import Settings
from recsql.statements import Request, Result

Progress = Callable[[IterationStats], None]


def sql(query: str, args: dict | list | None = None, *, spark: SparkSession | None = None,
        conf: dict[str, Any] | None = None, resume: bool = False, **kwargs: Any) -> DataFrame:
    """Run one statement like `SparkSession.sql`, with RaSQL recursion; returns a DataFrame.

    `args` binds `:name` markers; keyword arguments fill `{name}` placeholders (DataFrames become
    relations). `conf` overrides `spark.recsql.*` settings for this call only. `resume=True`
    continues each recursive group from its latest checkpoint written by an interrupted run of
    the same statement over the same inputs (see `spark.recsql.checkpointDir`).
    """
    return run(query, args, spark=spark, conf=conf, resume=resume, **kwargs).df


def run(query: str, args: dict | list | None = None, *, spark: SparkSession | None = None,
        conf: dict[str, Any] | None = None, progress: Progress | None = None,
        resume: bool = False, **kwargs: Any) -> Result:
    """Like `sql`, but returns a `Result` with `.df` and per-iteration `.stats`."""
    spark = resolve(spark)
    settings = Settings.read(spark, conf)
    text, frames = _format(query, kwargs)
    statement = parse_statement(text)
    request = Request(
        spark=spark, settings=settings, statement=statement,
        # positional `?` markers (a list) reach only statements passed straight to Spark
        args=None if isinstance(args, list) else args, frames=frames,
        passthrough=lambda: _spark_sql(spark, query, args, kwargs),
        on_iteration=progress, resume=resume)
    try:
        return statements.run(request)
    except RecSQLError as error:
        raise error.with_sql(statement.text) from None


def script(text: str, args: dict | list | None = None, *, spark: SparkSession | None = None,
           conf: dict[str, Any] | None = None, progress: Progress | None = None,
           resume: bool = False, **kwargs: Any) -> Result:
    """Run the `;`-separated statements of `text` in order; return the last one's result."""
    result = None
    for statement in split_statements(text):
        result = run(statement, args, spark=spark, conf=conf, progress=progress, resume=resume,
                     **kwargs)
    if result is None:
        raise RecSQLError("The script holds no statement", condition="RECSQL_EMPTY_SCRIPT")
    return result


def explain(query: str, args: dict | list | None = None, *, spark: SparkSession | None = None,
            conf: dict[str, Any] | None = None, mode: str = "SIMPLE", **kwargs: Any) -> str:
    """The recursive plan of `query` and Spark's physical plan of one iteration, as text."""
    stripped = query.lstrip()
    mode = "" if mode.upper() == "SIMPLE" else mode.upper() + " "  # Spark has no EXPLAIN SIMPLE
    prefix = "" if stripped[:7].upper() == "EXPLAIN" else f"EXPLAIN {mode}"
    result = run(prefix + query, args, spark=spark, conf=conf, **kwargs)
    return "\n".join(row[0] for row in result.df.collect())


def refresh(name: str, *, full: bool = False, spark: SparkSession | None = None,
            conf: dict[str, Any] | None = None, progress: Progress | None = None) -> Result:
    """`REFRESH MATERIALIZED VIEW name [FULL]`: bring a materialized view up to date with its
    base tables, from what changed where that is proven sound (see `EXPLAIN REFRESH
    MATERIALIZED VIEW name`), else in full. `name` is a table name as SQL writes it."""
    statement = f"REFRESH MATERIALIZED VIEW {name}{' FULL' if full else ''}"
    return run(statement, spark=spark, conf=conf, progress=progress)


def register_aggregate(name: str, merge: str, identity: str, type: str, *,
                       parameters: tuple[str, str] = ("a", "b"), replace: bool = False,
                       temporary: bool = False, spark: SparkSession | None = None) -> None:
    """Declare a head aggregate, as `CREATE [OR REPLACE] [TEMPORARY] AGGREGATE name(a type,
    b type) RETURNS type IDENTITY identity RETURN merge` does: the same checks (the merge's laws,
    its identity, both engines), kept in the same catalog. It only registers the aggregate; use
    it in a head (`name() AS c`) or a recursive term (`name(x) ... GROUP BY`).

        recsql.register_aggregate("bor", "a | b", "0", "BIGINT")
    """
    declared = CreateAggregate(
        this=exp.to_identifier(name),
        expressions=[exp.ColumnDef(this=exp.to_identifier(p), kind=_type(type)) for p in parameters],
        returns=_type(type), identity=_expression(identity, "identity"), merge=_expression(merge, "merge"),
        replace=replace, temporary=temporary)
    run(declared.sql("rasql"), spark=spark)


def _type(written: str) -> exp.DataType:
    try:
        return exp.DataType.build(written, dialect="spark")
    except (ParseError, ValueError) as error:
        raise RecSQLParseError(f"`{written}` is not a Spark type: {error}".split("\n")[0],
                               condition="PARSE_SYNTAX_ERROR") from None


def _expression(written: str, what: str) -> exp.Expr:
    try:
        return sqlglot.parse_one(written, read=DIALECT)
    except ParseError as error:
        raise RecSQLParseError(f"The aggregate's {what} `{written}` does not parse: {error}".split("\n")[0],
                               condition="PARSE_SYNTAX_ERROR") from None


def _spark_sql(spark: SparkSession, query: str, args, kwargs: dict) -> DataFrame:
    try:
        with quiet_pyspark_error_logs():
            return spark.sql(query, args=args, **kwargs)
    except (AnalysisException, ParseException) as error:
        raise from_spark_error(error, query) from None


class _Formatter(string.Formatter):
    """Fills `{name}` placeholders as `SparkSession.sql` does, except that a DataFrame becomes a
    `{rq_kw_<n>}` binding the executor passes on with the statement's own relations."""

    def __init__(self) -> None:
        self.frames: dict[str, DataFrame] = {}

    def get_field(self, field_name, args, kwargs):
        value, first = super().get_field(field_name, args, kwargs)
        if isinstance(value, DataFrame):
            binding = f"rq_kw_{len(self.frames)}"
            self.frames[binding] = value
            return "{" + binding + "}", first
        if isinstance(value, Column):
            raise RecSQLError(
                f"Placeholder {{{field_name}}} holds a Column; pass a value or a DataFrame",
                condition="RECSQL_INVALID_PARAMETER",
            )
        if isinstance(value, str):
            return get_lit_sql_str(value), first
        return value, first


def _format(query: str, kwargs: dict) -> tuple[str, dict[str, DataFrame]]:
    if not kwargs:
        return query, {}
    formatter = _Formatter()
    try:
        return formatter.format(query, **kwargs), formatter.frames
    except KeyError as error:
        raise RecSQLError(
            f"Placeholder {{{error.args[0]}}} has no value: pass {error.args[0]}=... to recsql.sql",
            condition="RECSQL_UNBOUND_PLACEHOLDER",
        ) from None
