"""Head aggregates users declare: `CREATE [OR REPLACE] [TEMPORARY] AGGREGATE` and `DROP
AGGREGATE`, kept in Spark's catalog.

A declared aggregate is stored as a Spark SQL function of its name whose body is its merge:
`CREATE [TEMPORARY] FUNCTION bor(a BIGINT, b BIGINT) RETURNS BIGINT COMMENT '...' RETURN a | b`,
the comment holding the whole declaration (`stored_aggregates.py`). So it is
where Spark keeps functions: in the session (TEMPORARY) or in the metastore, found by every
session and by `recsql serve`; `SHOW FUNCTIONS` and `DESCRIBE FUNCTION` list it; `SELECT bor(x,
y)` merges two values in plain Spark; and no other function can take its name. Creating one
checks it first (`laws.check`): nothing is stored unless every check passes.
"""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.types import DataType
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs
from recsql.parser import CreateAggregate, DropAggregate, Statement
from recsql.planner.model import DeclaredAggregate
from recsql.statements import laws
from recsql.statements.request import Request, Result
from recsql.statements.stored_aggregates import MARKER, declaration, stored


def takes(statement: Statement) -> bool:
    return isinstance(statement.expression, (CreateAggregate, DropAggregate))


def run(request: Request, node: exp.Expr) -> Result:
    with quiet_pyspark_error_logs():
        if isinstance(node, DropAggregate):
            _drop(request.spark, node)
        else:
            assert isinstance(node, CreateAggregate)  # `takes` chose this handler
            _create(request.spark, node, request.text)
    return request.command()


def _create(spark: SparkSession, node: CreateAggregate, text: str) -> None:
    aggregate = declaration(node)
    name = aggregate.name
    if spark.catalog.functionExists(name):
        existing = stored(spark, name)
        if existing is None:
            raise RecSQLAnalysisError(
                f"Cannot declare aggregate `{name}`: `{name}` is already a Spark function "
                f"({_what(spark, name)}), and a head `{name}() AS c` would be ambiguous; give "
                "the aggregate a name of its own (Spark's own bit_or, bit_and, bool_or and "
                "bool_and work in heads undeclared)",
                condition="RECSQL_AGGREGATE_NAME_TAKEN", sql=text, **_place(text, name))
        if not node.args.get("replace"):
            raise RecSQLAnalysisError(
                f"Aggregate `{name}` is already declared; write CREATE OR REPLACE AGGREGATE to "
                f"replace it, or DROP AGGREGATE {name} first",
                condition="RECSQL_AGGREGATE_ALREADY_EXISTS", sql=text, **_place(text, name))
    dtype = _spark_type(spark, aggregate, text)
    laws.check(spark, aggregate, dtype)
    try:
        spark.sql(_function(node))
    except AnalysisException as error:
        raise RecSQLAnalysisError(
            f"Spark refused to store aggregate `{name}` as a function: {error.getMessage()}",
            condition="RECSQL_AGGREGATE_NOT_STORED", sql=text) from None


def _spark_type(spark: SparkSession, aggregate: DeclaredAggregate, text: str) -> DataType:
    """The declared type as Spark reads it; a type Spark does not know is an error here."""
    written = aggregate.type.sql("spark")
    try:
        return spark.sql(f"SELECT CAST(NULL AS {written}) AS v").schema["v"].dataType
    except AnalysisException as error:
        raise RecSQLAnalysisError(
            f"Aggregate `{aggregate.name}` has type {written}, which Spark does not know: "
            f"{error.getMessage()}",
            condition="RECSQL_AGGREGATE_TYPE", sql=text, **_place(text, "RETURNS")) from None


def _function(node: CreateAggregate) -> str:
    """The `CREATE [OR REPLACE] [TEMPORARY] FUNCTION` that stores `node`."""
    comment = MARKER + _without_replace(node).sql("rasql")
    function = exp.Create(
        this=exp.UserDefinedFunction(this=exp.Table(this=node.this.copy()),
                                     expressions=[p.copy() for p in node.expressions], wrapped=True),
        kind="FUNCTION", replace=bool(node.args.get("replace")),
        expression=exp.Return(this=node.args["merge"].copy()),
        properties=exp.Properties(expressions=[
            *([exp.TemporaryProperty()] if node.args.get("temporary") else []),
            exp.ReturnsProperty(this=node.args["returns"].copy()),
            exp.SchemaCommentProperty(this=exp.Literal.string(comment))]))
    return function.sql("spark")


def _without_replace(node: CreateAggregate) -> CreateAggregate:
    copy = node.copy()
    copy.set("replace", None)
    return copy


def _drop(spark: SparkSession, node: DropAggregate) -> None:
    name = node.name
    found = stored(spark, name)
    if found is None:
        if spark.catalog.functionExists(name):
            raise RecSQLAnalysisError(
                f"`{name}` is a Spark function ({_what(spark, name)}), not an aggregate declared "
                "with CREATE AGGREGATE: drop it with DROP FUNCTION",
                condition="RECSQL_NOT_AN_AGGREGATE")
        if node.args.get("exists"):
            return
        raise RecSQLAnalysisError(
            f"Cannot drop aggregate `{name}`: no aggregate of that name is declared (DROP "
            "AGGREGATE IF EXISTS drops it only if it is)",
            condition="RECSQL_AGGREGATE_NOT_FOUND")
    temporary = "TEMPORARY " if found.temporary else ""
    spark.sql(f"DROP {temporary}FUNCTION {exp.to_identifier(name, quoted=True).sql('spark')}")


def _what(spark: SparkSession, name: str) -> str:
    function = spark.catalog.getFunction(name)
    if function.className and not function.className.startswith("sqlFunction"):
        return "one of Spark's built-in functions" if function.catalog is None else \
            f"function {function.className}"
    return "a SQL function of the catalog"


def _place(text: str, word: str) -> dict:
    """Where `word` is first written in `text` (line, pos, length), for the error's caret."""
    found = text.lower().find(word.lower())
    if found < 0:
        return {}
    return {"line": text.count("\n", 0, found) + 1, "pos": found - (text.rfind("\n", 0, found) + 1),
            "length": len(word)}
