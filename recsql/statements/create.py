"""CREATE TABLE ... AS and CREATE VIEW over a recursive query.

A table stores the answer. A view Spark creates by itself (a `WITH RECURSIVE ... UNION ALL`
body Spark accepts, reading no recursive view of recsql) is created by Spark and stays a view
plain Spark reads, as pipelines mixing `recsql.sql` and `spark.sql` expect. Only a view
whose body needs recsql is stored as a recsql definition (`recsql.statements.views`), expanded by
every statement that reads it."""

from __future__ import annotations

import warnings

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.executor.analysis.stage import AnalysedPlan
from recsql.executor.loop.spark_sql import from_spark_error, quiet_pyspark_error_logs, render
from recsql.parser.locate import locate
from recsql.planner import QueryPlan
from recsql.planner.views import Expansion
from recsql.statements import stages, views
from recsql.statements.request import Request, Result
from recsql.statements.targets import target, writing


def run(request: Request, node: exp.Create) -> Result:
    kind = (node.args.get("kind") or "").upper()
    expansion = stages.bind(request, node.expression)
    plan = stages.plan(request, expansion)
    if plan is None:
        return _by_spark(request, node, kind)
    analysed = stages.analyse(request, plan)
    if kind == "VIEW":
        _check_storable(request, target(node).sql("rasql"), plan, node)
        if not expansion.views and _created_by_spark(request):
            return request.command(plan=plan)
        return _create_recursive_view(request, node, analysed, expansion)
    result = stages.execute(request, analysed)
    writer = result.df.write
    fmt = _using(node)
    if fmt:
        writer = writer.format(fmt)
    with writing(target(node), request.text):
        writer.saveAsTable(target(node).sql("rasql"),
                           mode="overwrite" if node.args.get("replace") else "errorifexists")
    return request.command(result.stats, plan)


def _by_spark(request: Request, node: exp.Create, kind: str) -> Result:
    try:
        return Result(df=request.passthrough(), kind="command")
    except RecSQLAnalysisError as error:
        if kind != "VIEW" or "TEMP" not in error.condition:
            raise
        # A permanent view over temporary objects: Spark refuses, RaDlog kept it per session.
        name = target(node).sql("rasql")
        warnings.warn(f"view {name} refers to temporary objects; registered as a temporary "
                      "view of this session", stacklevel=5)
        df = request.spark.sql(render(node.expression, escape_braces=False), args=request.args)
        with writing(target(node), request.text):
            _with_columns(df, node).createOrReplaceTempView(name)
        return request.command()


def _create_recursive_view(request: Request, node: exp.Create, analysed: AnalysedPlan,
                           expansion: Expansion) -> Result:
    """Store a view that needs recsql: its definition, expanded by every statement that reads
    it, and a Spark view of its columns and types that refuses to be read without recsql. The
    query is analysed here, not run, as Spark analyses a view's body when it is created: that
    checks it and gives the columns their types (`Executor.typed`, no Spark job; running the
    fixpoint to learn them took minutes over a large graph)."""
    plan = analysed.plan
    table = target(node)
    name = table.sql("rasql")
    temporary = any(isinstance(p, exp.TemporaryProperty) for p in _properties(node))
    replace, if_not_exists = bool(node.args.get("replace")), bool(node.args.get("exists"))
    if not temporary:
        reason = _temporary_reads(request.spark, expansion) or _temporary_aggregate(plan)
        if reason:
            # Spark refuses a permanent view over temporary objects; RaDlog kept it per session.
            warnings.warn(f"view {name} refers to temporary {reason}; registered as a temporary "
                          "view of this session", stacklevel=5)
            temporary = True
    existing = _existing(request.spark, name, temporary)
    if existing and if_not_exists:
        return request.command(plan=plan)
    if existing and not replace:
        raise RecSQLAnalysisError(
            f"Cannot create view `{name}` because it already exists; choose a different name, "
            "drop or replace the existing view (CREATE OR REPLACE), or add IF NOT EXISTS",
            condition="TABLE_OR_VIEW_ALREADY_EXISTS", **locate(table, request.text))
    schema = _with_columns(request.executor.typed(analysed), node).schema
    text = node.expression.sql("rasql")
    if temporary:
        views.create_temporary(request.spark, name, schema, text)
    else:
        create = views.create_statement(table, schema, text, replace=replace, if_not_exists=if_not_exists)
        try:
            with quiet_pyspark_error_logs():
                request.spark.sql(create)
        except AnalysisException as error:
            raise from_spark_error(error, request.text) from None
    return request.command(plan=plan)


def _check_storable(request: Request, name: str, plan: QueryPlan, node: exp.Create) -> None:
    """A view keeps text: parameters bound for this one statement cannot be kept with it."""
    bound = sorted(plan.parameters) or sorted(request.frames)
    if bound:
        raise RecSQLAnalysisError(
            f"View `{name}` cannot keep the parameter(s) {', '.join(bound)} bound for this "
            "statement (Spark refuses parameters in views too); write the values into its text "
            "or create a table instead",
            condition="RECSQL_VIEW_WITH_PARAMETERS", **locate(node.expression, request.text))


def _created_by_spark(request: Request) -> bool:
    """Create the view as Spark would, if Spark creates it by itself; False if Spark refuses."""
    try:
        with quiet_pyspark_error_logs():
            request.passthrough()
    except Exception:  # noqa: BLE001 - any refusal means no: Spark refuses some (a UNION of
        # INT and BIGINT in a recursion) with an unconverted SparkException under Py4J
        return False
    return True


def _temporary_aggregate(plan: QueryPlan) -> str | None:
    """The temporary declared aggregate a head uses (`aggregate bor`), else None: like a
    temporary view, it lives only as long as this session."""
    for group in plan.groups:
        for cte in group.ctes:
            for column in cte.head:
                if column.declared is not None and column.declared.temporary:
                    return f"aggregate {column.declared.name}"
    return None


def _temporary_reads(spark: SparkSession, expansion: Expansion) -> str | None:
    """What temporary object the expanded view body reads, if any (`view x`), else None."""
    for view in expansion.views:
        if view.temporary:
            return f"view {view.name}"
    local = {c.alias.lower() for c in expansion.query.find_all(exp.CTE)}
    for table in expansion.query.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.args.get("db") \
                or table.name.lower() in local:
            continue
        try:
            if spark.catalog.getTable(table.name).isTemporary:
                return f"view {table.name}"
        except AnalysisException:
            continue
    return None


def _existing(spark: SparkSession, name: str, temporary: bool) -> bool:
    """Whether creating view `name` meets an object of its kind: a temporary view for a
    temporary one, anything in the catalog for a permanent one."""
    try:
        with quiet_pyspark_error_logs():
            found = spark.catalog.getTable(name)
    except AnalysisException:
        return False
    return bool(found.isTemporary) if temporary else not found.isTemporary


def _with_columns(df: DataFrame, node: exp.Create) -> DataFrame:
    """Apply a `CREATE VIEW v (a, b)` column list."""
    if isinstance(node.this, exp.Schema) and node.this.expressions:
        return df.toDF(*[c.name for c in node.this.expressions])
    return df


def _properties(node: exp.Create) -> list[exp.Expr]:
    props = node.args.get("properties")
    return list(props.expressions) if props else []


def _using(node: exp.Create) -> str | None:
    for prop in _properties(node):
        if isinstance(prop, exp.FileFormatProperty):
            return prop.name or prop.this.name
    return None
