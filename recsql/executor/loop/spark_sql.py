"""Running planned SQL on Spark: rendering ASTs with their `{binding}` DataFrames, and turning
Spark's exceptions about the user's query into recsql errors (never a raw Py4J trace)."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

import sqlglot
from pyspark.errors import AnalysisException, ParseException, PySparkException
from pyspark.logger import PySparkLogger
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp
from sqlglot.errors import SqlglotError

from recsql.errors import RecSQLAnalysisError, RecSQLParseError
from recsql.parser.locate import locate, locate_name, locate_span
from recsql.planner.names import TableName

log = logging.getLogger(__name__)

# pyspark logs every analysis error it raises as JSON on stderr; recsql reports them itself.
_PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextlib.contextmanager
def quiet_pyspark_error_logs() -> Iterator[None]:
    # pyspark's own loggers: made first by `logging.getLogger`, they would be plain loggers, which
    # pyspark then finds and calls with its own keywords (`errorClass`), so that every later
    # analysis error of the user's own `spark.sql` became a TypeError
    loggers = [PySparkLogger.getLogger(name) for name in _PYSPARK_ERROR_LOGGERS]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was


def render(node: exp.Expr, escape_braces: bool) -> str:
    """Spark SQL text of `node`; identifiers are quoted so reserved words (`From`) stay names.

    When the text goes through pyspark's `{name}` formatting, braces inside string literals
    are doubled so they survive it, and comments are left out: a tool's comment holds braces too
    (dbt prefixes every statement with `/* {"app": "dbt", ...} */`).
    """
    if escape_braces:
        node = node.copy()
        for literal in node.find_all(exp.Literal):
            if literal.is_string and ("{" in literal.this or "}" in literal.this):
                literal.set("this", literal.this.replace("{", "{{").replace("}", "}}"))
    return node.sql("rasql", identify=True, comments=not escape_braces)


def run_sql(
    spark: SparkSession,
    text: str,
    bindings: dict[str, DataFrame],
    args: dict[str, Any] | None,
    user_sql: str,
    user_ast: exp.Expr | None = None,
) -> DataFrame:
    """`spark.sql(text)` with `{binding}` DataFrames and the `:name` arguments it uses."""
    used_args = {k: v for k, v in (args or {}).items() if re.search(rf":{re.escape(k)}\b", text)}
    # pyspark binds each DataFrame as a temporary view and drops the view afterwards, and dropping
    # a view uncaches every cache entry of the same plan: a binding that is exactly a user's cached
    # table (a DataFrame argument, a base table read for typing) lost the user's cache. A filter
    # that is always true makes another plan, which the optimizer removes again.
    bound = {name: df.filter("true") for name, df in bindings.items()}  # text: no Column to build
    try:
        return spark.sql(text, args=used_args or None, **bound)
    except (AnalysisException, ParseException) as error:
        raise from_spark_error(error, user_sql, user_ast) from None


def query_df(spark: SparkSession, node: exp.Expr, env: dict[str, DataFrame], args: dict[str, Any] | None,
             user_sql: str) -> DataFrame:
    """A query of the statement (a plain CTE, the final query) over the DataFrames `env` binds:
    as DataFrame calls where it can be (`as_dataframe_calls`), else as text."""
    used = {k: v for k, v in env.items() if binds(node, k)}
    if not args:
        calls = as_dataframe_calls(node, used)
        if calls is not None:
            return calls
    return run_sql(spark, render(node, escape_braces=bool(used)), used, args, user_sql, node)


def binds(node: exp.Expr, binding: str) -> bool:
    """Whether `node` reads the DataFrame bound as `binding`."""
    return any(
        isinstance(t.this, exp.Placeholder) and t.this.name == binding for t in node.find_all(exp.Table)
    )


# What a query must not hold to be run as DataFrame calls (`as_dataframe_calls`): anything
# whose meaning depends on the query around it (subqueries, parameter markers), and aggregates,
# windows and generators, which change the shape of the SELECT they are in.
_NOT_AS_CALLS = (exp.Query, exp.Subquery, exp.Exists, exp.Placeholder, exp.Parameter, exp.AggFunc,
                 exp.Window, exp.Explode, exp.Inline, exp.Unnest, exp.Aliases)
_SELECT_PARTS = {"expressions", "from_", "where"}


def as_dataframe_calls(node: exp.Expr, bindings: dict[str, DataFrame]) -> DataFrame | None:
    """`SELECT items FROM source [WHERE condition]`, the source a bound DataFrame or such a
    query in parentheses, as DataFrame calls (`alias`, `toDF`, `where`, `selectExpr`) on the
    bound DataFrames; None for any other query, or if Spark refuses it (the caller then runs
    the text, whose error Spark reports for the whole query).

    The same plan as `spark.sql` builds: each item and the condition is parsed by Spark's own
    expression parser and resolved by the same analyzer over the same relation, in the order
    the SQL applies them (FROM, WHERE, SELECT). Without the text, pyspark registers no
    temporary view per bound DataFrame and drops none (the filter `run_sql` adds to keep a
    user's cache is then not needed either), and the parser runs on the pieces only: the warm
    final query of a filtered closure view took about 10 ms less. Analysed here (`schema`), as
    `spark.sql` analyses its text at once also on Spark Connect, so a refusal is seen here."""
    try:
        df = _select_calls(node, bindings)
        if df is not None:
            df.schema  # noqa: B018 (Spark analyses the plan here, as spark.sql would)
        return df
    except PySparkException:
        return None


def _select_calls(node: exp.Expr, bindings: dict[str, DataFrame], outermost: bool = True) -> DataFrame | None:
    if not isinstance(node, exp.Select) or any(v for k, v in node.args.items() if k not in _SELECT_PARTS):
        return None
    from_ = node.args.get("from_")
    where = node.args.get("where")
    items = list(node.expressions)
    if from_ is None or not items or not all(isinstance(i, (exp.Column, exp.Alias, exp.Star)) for i in items):
        return None
    read = [*items, *([where.this] if where else [])]
    if any(e.find(*_NOT_AS_CALLS) for e in read):
        return None
    source = from_.this
    if any(v for k, v in source.args.items() if k not in {"this", "alias"}):
        return None
    if isinstance(source, exp.Table) and isinstance(source.this, exp.Placeholder):
        df = bindings.get(source.this.name)
    elif isinstance(source, exp.Subquery) and source.alias:
        # unnamed, Spark names it itself, which hides the names inside from the query around it
        df = _select_calls(source.this, bindings, outermost=False)
    else:
        return None
    if df is None:
        return None
    # Each call is an analysis: a rename or a name that nothing needs is left out. The outermost
    # name stays, as it qualifies the answer's columns (`df.select("closure.node")`).
    alias = source.args.get("alias")
    columns = [c.name for c in alias.args.get("columns") or []] if alias is not None else []
    if columns and columns != _output_names(source.this):
        df = df.toDF(*columns)
    if alias is not None and alias.name and (outermost or any(c.table for e in read for c in e.find_all(exp.Column))):
        df = df.alias(alias.name)
    if where is not None:
        df = df.where(_expression_text(where.this))
    return df.selectExpr(*[_expression_text(i) for i in items])


def _output_names(node: exp.Expr) -> list[str] | None:
    """The column names a SELECT of aliased items yields, as written; None if any item is not
    aliased (Spark names an unaliased column as written too, `SELECT ID` of a column `id` gives
    `ID`, but a star or an expression it names itself)."""
    if not isinstance(node, exp.Select) or not all(isinstance(i, exp.Alias) for i in node.expressions):
        return None
    return [i.alias for i in node.expressions]


def _expression_text(node: exp.Expr) -> str:
    return node.sql("rasql", identify=True, comments=False)


def from_spark_error(error: PySparkException, user_sql: str, user_ast: exp.Expr | None = None,
                     at: dict | None = None):
    """A recsql error for Spark's complaint about the user's query, located in the user's text.

    With `user_ast` the SQL Spark saw was rendered by recsql, so Spark's line/pos mean nothing
    to the user: the named column or table is looked up in the user's AST instead. Without it,
    Spark saw the user's own text and its position is kept. `at`: the position, when the caller
    knows what Spark complains about (a DataFrame call's error has none).
    """
    condition = error.getCondition() or "SPARK_ERROR"
    raw = error.getMessage() if hasattr(error, "getMessage") else str(error)
    if at is not None:
        position = at
    elif user_ast is not None:
        try:
            position = _locate_named(error, user_ast, user_sql)
        except Exception:  # noqa: BLE001 - the place is a courtesy; Spark's error must reach the user
            log.debug("recsql: no place found for %s", condition, exc_info=True)
            position = {}
    else:
        position = _spark_position(error, user_sql)
    cls = RecSQLParseError if isinstance(error, ParseException) else RecSQLAnalysisError
    failure = cls(_strip_internal(raw, condition), condition=condition, sql=user_sql, **position)
    failure.sqlstate = error.getSqlState()  # kept for clients that read it (the server, JDBC)
    return failure


def _strip_internal(message: str, condition: str) -> str:
    """Spark's first line, without its `[CONDITION]` prefix, SQLSTATE and position."""
    message = message.strip().split("\n== SQL", 1)[0]
    message = re.sub(rf"^\[{re.escape(condition)}\]\s*", "", message)
    message = re.sub(r"\s*SQLSTATE: \w+", "", message)
    message = re.sub(r";?\s*\(?line \d+,? pos \d+\)?.*", "", message, flags=re.S)
    return message.strip()


def _spark_position(error: PySparkException, sql: str) -> dict:
    """Line/pos of Spark's query context (analysis errors) or of its `line L, pos P` (parse)."""
    for context in error.getQueryContext() or []:
        try:
            start, stop = context.startIndex(), context.stopIndex()
        except Exception:  # a DataFrame context has no SQL offsets
            continue
        if start is not None and start >= 0:
            line = sql.count("\n", 0, start) + 1
            pos = start - (sql.rfind("\n", 0, start) + 1)
            return {"line": line, "pos": pos, "length": max(1, stop - start + 1)}
    match = re.search(r"line (\d+),? pos (\d+)", str(error))
    return {"line": int(match.group(1)), "pos": int(match.group(2))} if match else {}


# The message parameters in which Spark names the expression it complains about, as it renders it
# (`"(Y = M)"`): a type mismatch's, an aggregate's outside GROUP BY, a WHERE condition's, a window
# function's.
_EXPRESSION_PARAMS = ("sqlExpr", "expression", "condition", "wf_expr")


def _locate_named(error: PySparkException, user_ast: exp.Expr, user_sql: str) -> dict:
    """Find what Spark complains about in the user's own AST: the column, table or function it
    could not resolve, the column it found ambiguous (its first use), the expression it names
    (`_EXPRESSION_PARAMS`), or else the part of the query it quotes."""
    params = error.getMessageParameters() or {}
    written = params.get("objectName") or params.get("relationName") or (
        params.get("name", "") if error.getCondition() == "AMBIGUOUS_REFERENCE" else "")
    if params.get("routineName"):  # `NOFN`, or `db`.`f`: the call as written, by its last part
        routine = params["routineName"].split(".")[-1].strip("`").lower()
        for call in user_ast.find_all(exp.Func):
            if (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower() == routine:
                return locate_span(call, user_sql)
        return {}
    if not written:
        for named in _EXPRESSION_PARAMS:
            position = _locate_expression(error, params.get(named) or "", user_ast, user_sql)
            if position:
                return position
        return _locate_fragment(error, user_ast, user_sql)
    for table in user_ast.find_all(exp.Table):  # Spark names a relation `db`.`t`, as TableName.sql
        if isinstance(table.this, exp.Identifier) and TableName.of(table).sql.lower() == written.lower():
            return locate_name(table, user_sql)
    try:  # `edge`.`nope`: its parts as Spark reads a dotted name
        parts = list(TableName.parse(written).key)
    except SqlglotError:  # not a dotted name sqlglot reads: its last part as written
        parts = [written.split(".")[-1].strip("`").lower()]
    if not parts:
        return {}
    columns = list(user_ast.find_all(exp.Column))
    # as written first (`X` is the unqualified X, not `tc`.`X`), then by its last part
    for node in columns:
        if [i.name.lower() for i in node.parts] == parts:
            return locate(node, user_sql)
    for candidate in [*columns, *user_ast.find_all(exp.Table)]:
        if candidate.name.lower() == parts[-1]:
            return locate(candidate, user_sql)
    return {}


def _locate_expression(error: PySparkException, spark_text: str, user_ast: exp.Expr, user_sql: str) -> dict:
    """The one expression of the user's text that Spark's `sqlExpr` renders (`"(Y = M)"` for
    `tc.Y = edge.M`: Spark drops qualifiers and adds parentheses, so both sides are compared
    without them); a filter that is not boolean among the WHERE and ON conditions only. {} where
    that is not one place of the user's text (recsql wrote it, or it is written twice), so that
    no caret misleads."""
    if not spark_text:
        return {}
    try:
        wanted = sqlglot.parse_one(spark_text.strip().strip('"'), read="spark")
    except SqlglotError:
        return {}
    key = _unqualified(wanted)
    found = [n for n in user_ast.find_all(type(wanted.unnest()))
             if not isinstance(n, exp.Paren) and _unqualified(n) == key]
    if (error.getCondition() or "").endswith("FILTER_NOT_BOOLEAN"):
        found = [n for n in found if _is_condition(n)]
    return locate_span(found[0], user_sql) if len(found) == 1 else {}


def _locate_fragment(error: PySparkException, user_ast: exp.Expr, user_sql: str) -> dict:
    """The one part of the user's query that renders as the text Spark's query context quotes
    from recsql's rendering (`sum(`Cost`)` of a nested aggregate); {} where no part, or more than
    one, does. A whole query is not a place: Spark quotes it when it has nothing narrower."""
    def text(node: exp.Expr) -> str:
        return re.sub(r"\s+", "", node.sql("rasql", identify=True, comments=False)).lower()

    for context in error.getQueryContext() or []:
        try:
            fragment = re.sub(r"\s+", "", context.fragment() or "").lower()
        except Exception:  # noqa: BLE001 - a DataFrame context has no SQL fragment
            continue
        if not fragment:
            continue
        found = [n for n in user_ast.walk() if isinstance(n, exp.Expr)
                 and not isinstance(n, (exp.Query, exp.Paren, exp.Identifier)) and text(n) == fragment]
        if len(found) == 1:
            return locate_span(found[0], user_sql)
    return {}


def _unqualified(node: exp.Expr) -> str:
    """`node` as Spark names it in a message, case aside: no table qualifiers, no parentheses."""
    def strip(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column):
            return exp.column(n.name)
        return n.unnest()

    return node.unnest().transform(strip).sql("spark").lower()


def _is_condition(node: exp.Expr) -> bool:
    """A whole WHERE or ON condition: what Spark says is not boolean is a filter's condition."""
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return isinstance(parent, exp.Where) or (isinstance(parent, exp.Join) and node.arg_key == "on")


def describe_jobs(spark, description: str) -> None:
    """Label the Spark jobs (classic sessions; Connect has no SparkContext)."""
    try:
        spark.sparkContext.setJobDescription(description)
    except Exception:  # Spark Connect: no SparkContext
        pass
