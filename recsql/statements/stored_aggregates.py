"""Where declared aggregates are kept: each as a Spark SQL function of its name whose body is its
merge and whose comment holds the whole declaration (`MARKER`, then the `CREATE AGGREGATE`
text). `recsql.statements.aggregates` creates and drops them; the catalog the planner binds
against reads them (`stored`)."""

from __future__ import annotations

import json

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from recsql.parser import CreateAggregate, parse_statement
from recsql.planner.model import DeclaredAggregate

MARKER = "recsql aggregate: "


def declaration(node: CreateAggregate) -> DeclaredAggregate:
    first, second = node.parameters
    return DeclaredAggregate(node.name, (first, second), node.args["merge"], node.args["identity"],
                             node.args["returns"], temporary=bool(node.args.get("temporary")))


def stored(spark: SparkSession, name: str) -> DeclaredAggregate | None:
    """The aggregate declared as `name` that Spark's catalog resolves (temporary first, as Spark
    resolves a function), or None when `name` is no declared aggregate."""
    text = _definition(spark, name)
    if text is None:
        return None
    node = parse_statement(text).expression
    return declaration(node) if isinstance(node, CreateAggregate) else None


def _definition(spark: SparkSession, name: str) -> str | None:
    try:
        if not spark.catalog.functionExists(name):
            return None
        function = spark.catalog.getFunction(name)
    except AnalysisException:  # a name Spark does not parse as a function's
        return None
    try:  # a SQL function's description is its properties as JSON; a builtin's is prose
        comment = json.loads(function.description or "").get("sqlFunction.comment", "")
    except (ValueError, AttributeError):
        return None
    return comment[len(MARKER):] if comment.startswith(MARKER) else None
