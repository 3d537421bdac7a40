"""The table a CREATE or INSERT writes, and Spark's refusals of it in the user's terms."""

from __future__ import annotations

import contextlib

from pyspark.errors import AnalysisException
from sqlglot import exp

from recsql.executor.loop.spark_sql import from_spark_error
from recsql.parser.locate import locate_name


def target(node: exp.Create | exp.Insert) -> exp.Table:
    """The table a CREATE or INSERT writes (`db.t` of `INSERT INTO db.t (a, b) ...`)."""
    return node.this.this if isinstance(node.this, exp.Schema) else node.this


@contextlib.contextmanager
def writing(table: exp.Table, sql: str):
    """Spark's refusal of a statement's target (no such schema, a table that exists, a temp
    view name of several parts) as a recsql error that points at the target's name."""
    try:
        yield
    except AnalysisException as error:
        raise from_spark_error(error, sql, at=locate_name(table, sql)) from None
