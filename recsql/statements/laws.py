"""The checks a declared aggregate passes before it is stored (`aggregates.py`).

A head aggregate's merge is a lattice's join: merging the derivations of a group in any order,
in any grouping and any number of times must give one answer, and the identity merged with a
value must give the value back. So the merge must be commutative, associative and idempotent,
and the identity its identity. These are checked on random samples drawn from the merge's own
outputs (a merge may only ever see its outputs and the values the recursion derives: sorting
and de-duplicating arrays is idempotent on its outputs, not on every array), compared with
`<=>` (NULL-safe), as Spark evaluates them: the merge as recsql runs it
(`planner/aggregates.declared`). The same samples, the pairs' merges and a group's fold then run
in DuckDB, as the driver endgame renders them: a merge DuckDB cannot run, or that gives another
value there, is refused too, since both engines must give one answer.

The samples are drawn by a seeded generator: one declaration is always checked on the same
values. A law checked on samples is a test, not a proof; it catches the usual mistakes
(`a + b`, `a - b`, an identity that is not one).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.planner.aggregates import Aggregate, declared
from recsql.planner.model import DeclaredAggregate

SEEDS, PAIRS, TRIPLES = 12, 40, 60  # values drawn, pairs merged into the pool, triples checked
X, Y, Z, GROUP = "x", "y", "z", "g"
SUPPORTED = ("BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL, STRING, DATE, "
             "and ARRAY or STRUCT of them")
_INTEGRAL_RANGE = {ByteType: 127, ShortType: 4095, IntegerType: 4095, LongType: 4095}


def check(spark: SparkSession, aggregate: DeclaredAggregate, dtype: DataType) -> None:
    """Raise a `RecSQLAnalysisError` naming the first law `aggregate` breaks, with a
    counterexample; or that DuckDB cannot run it or disagrees with Spark."""
    rng = random.Random(0)
    meaning = declared(aggregate)
    seeds = [_draw(aggregate, dtype, rng) for _ in range(SEEDS)]
    pairs = [(rng.choice(seeds), rng.choice(seeds)) for _ in range(PAIRS)]
    merged = _spark(aggregate, lambda: _frame(spark, dtype, [X, Y], pairs)
                    .select(F.expr(_merge(meaning, X, Y).sql("spark", identify=True)).alias(X)).collect())
    pool = [row[X] for row in merged]
    triples = [(rng.choice(pool), rng.choice(pool), rng.choice(pool)) for _ in range(TRIPLES)]
    samples = _frame(spark, dtype, [X, Y, Z], triples).withColumn(GROUP, F.monotonically_increasing_id() % 4)
    checks = _checks(meaning)
    answered = _spark(aggregate, lambda: samples.select(
        X, Y, Z, GROUP, *[F.expr(e.sql("spark", identify=True)).alias(n) for n, e in checks.items()]).toArrow())
    for law in LAWS:
        for row in answered.to_pylist():
            if not row[law]:
                raise _broken(aggregate, law, row)
    _same_in_duckdb(spark, aggregate, meaning, samples, answered)


def _merge(meaning: Aggregate, a: str, b: str | exp.Expr) -> exp.Expr:
    return meaning.combine(exp.column(a, quoted=True),
                           exp.column(b, quoted=True) if isinstance(b, str) else b)


def _checks(meaning: Aggregate) -> dict[str, exp.Expr]:
    """The merges the laws compare, and each law as a NULL-safe comparison."""
    xy, yx = _merge(meaning, X, Y), _merge(meaning, Y, X)
    left = meaning.combine(xy.copy(), exp.column(Z, quoted=True))
    right = meaning.combine(exp.column(X, quoted=True), _merge(meaning, Y, Z))
    xx = _merge(meaning, X, X)
    assert meaning.identity is not None and meaning.type is not None  # a declared aggregate's
    xe = meaning.combine(exp.column(X, quoted=True), exp.Cast(this=meaning.identity.copy(), to=meaning.type.copy()))
    values = {"xy": xy, "yx": yx, "xy_z": left, "x_yz": right, "xx": xx, "xe": xe}
    x = exp.column(X, quoted=True)
    laws = {
        "commutative": exp.NullSafeEQ(this=xy.copy(), expression=yx.copy()),
        "associative": exp.NullSafeEQ(this=left.copy(), expression=right.copy()),
        "idempotent": exp.NullSafeEQ(this=xx.copy(), expression=x.copy()),
        "identity": exp.NullSafeEQ(this=xe.copy(), expression=x.copy()),
    }
    return {**values, **laws}


# each law, in the order they are checked, and its counterexample: a template over the row's
# values (`f`: the aggregate's name, `e`: its identity)
LAWS = {
    "commutative": "{f}(x, y) = {xy} but {f}(y, x) = {yx} for x = {x}, y = {y}",
    "associative": "{f}({f}(x, y), z) = {xy_z} but {f}(x, {f}(y, z)) = {x_yz} for x = {x}, y = {y}, z = {z}",
    "idempotent": "{f}(x, x) = {xx}, not x, for x = {x}",
    "identity": "{f}(x, {e}) = {xe}, not x, for x = {x}",
}


def _broken(aggregate: DeclaredAggregate, law: str, row: dict) -> RecSQLAnalysisError:
    f, e = aggregate.name, aggregate.identity.sql("spark")
    example = LAWS[law].format(f=f, e=e, **{k: _show(v) for k, v in row.items()})
    what = f"its IDENTITY {e} is not an identity of its merge" if law == "identity" else f"its merge is not {law}"
    return RecSQLAnalysisError(
        f"Aggregate `{f}` is refused: {what}: {example} (merge `{aggregate.merge.sql('spark')}`). "
        "A head aggregate's merge must be commutative, associative and idempotent, with IDENTITY "
        "the value that merges with any value to give it back, so that merging a group's "
        "derivations in any order and any number of times gives one answer (checked on samples "
        "of its own outputs); nothing was declared",
        condition="RECSQL_AGGREGATE_LAW")


def _same_in_duckdb(spark: SparkSession, aggregate: DeclaredAggregate, meaning: Aggregate,
                    samples: DataFrame, answered: pa.Table) -> None:
    """The pairs' merges and each group's fold, in DuckDB as the endgame renders them, equal
    Spark's."""
    fold = meaning.folded(exp.column(X, quoted=True))
    spark_folds = _spark(aggregate, lambda: samples.groupBy(GROUP).agg(
        F.expr(fold.sql("spark", identify=True)).alias("f")).orderBy(GROUP).toArrow())
    merge = _merge(meaning, X, Y)
    queries = {
        "merge": (exp.select(exp.alias_(merge, "xy")).from_("samples"), answered.select(["xy"])),
        "fold": (exp.select(GROUP, exp.alias_(fold, "f")).from_("samples").group_by(GROUP).order_by(GROUP),
                 spark_folds),
    }
    connection = duckdb.connect()
    try:
        connection.register("samples", answered.select([X, Y, Z, GROUP]))
        for what, (query, expected) in queries.items():
            sql = query.sql("duckdb", identify=True)
            try:
                result: Any = connection.sql(sql)
                got = (getattr(result, "to_arrow_table", None) or result.fetch_arrow_table)()  # duckdb 2 / 1.x
            except duckdb.Error as error:
                raise _not_in_duckdb(aggregate, f"DuckDB cannot run its {what}: {error}".split("\n")[0]) from None
            mismatch = next(((i, a, b) for i, (a, b) in enumerate(zip(
                expected.to_pylist(), got.to_pylist())) if a != b), None)
            if mismatch is not None:
                i, want, found = mismatch
                inputs = answered.slice(i, 1).to_pylist()[0] if what == "merge" else {}
                shown = f" for x = {_show(inputs[X])}, y = {_show(inputs[Y])}" if inputs else ""
                raise _not_in_duckdb(aggregate, f"its {what} gives {_show(list(found.values())[-1])} in DuckDB "
                                     f"but {_show(list(want.values())[-1])} in Spark{shown}")
    finally:
        connection.close()


def _not_in_duckdb(aggregate: DeclaredAggregate, why: str) -> RecSQLAnalysisError:
    return RecSQLAnalysisError(
        f"Aggregate `{aggregate.name}` is refused: {why} (merge `{aggregate.merge.sql('spark')}`, "
        "as DuckDB: `" + declared(aggregate).combine(exp.column("a"), exp.column("b")).sql("duckdb") + "`). "
        "recsql runs a recursion's last iterations on the driver in DuckDB, so a merge must mean "
        "the same in both engines: write it with functions both have (least, greatest, |, &, "
        "array_sort, array_distinct, concat, named_struct, ...); nothing was declared",
        condition="RECSQL_AGGREGATE_NOT_PORTABLE")


def _spark(aggregate: DeclaredAggregate, evaluate: Callable[[], Any]) -> Any:
    """`evaluate()`, with Spark's failure to evaluate the merge as a declaration error."""
    try:
        return evaluate()
    except PySparkException as error:
        message = error.getMessage() or str(error)
        raise RecSQLAnalysisError(
            f"Aggregate `{aggregate.name}` is refused: Spark cannot evaluate its merge "
            f"`{aggregate.merge.sql('spark')}` over values of type {aggregate.type.sql('spark')}: "
            f"{str(message).splitlines()[0]}; nothing was declared",
            condition="RECSQL_AGGREGATE_INVALID") from None


def _frame(spark: SparkSession, dtype: DataType, names: list[str], rows: list[tuple]) -> DataFrame:
    return spark.createDataFrame(rows, StructType([StructField(n, dtype, True) for n in names]))


def _draw(aggregate: DeclaredAggregate, dtype: DataType, rng: random.Random) -> Any:
    """A random value of `dtype`, as a Python value Spark takes."""
    draw = _drawer(dtype)
    if draw is None:
        raise RecSQLAnalysisError(
            f"Aggregate `{aggregate.name}` has type {aggregate.type.sql('spark')}, whose values "
            f"recsql cannot draw to check its merge: declare one of {SUPPORTED}",
            condition="RECSQL_AGGREGATE_TYPE")
    return draw(rng)


def _drawer(dtype: DataType) -> Callable[[random.Random], Any] | None:
    if isinstance(dtype, BooleanType):
        return lambda rng: rng.random() < 0.5
    for kind, top in _INTEGRAL_RANGE.items():
        if isinstance(dtype, kind):
            return _integral(top)
    if isinstance(dtype, (FloatType, DoubleType)):
        return lambda rng: float(rng.randint(-400, 400)) / 4  # exact in both widths
    if isinstance(dtype, DecimalType):
        digits = min(dtype.precision - dtype.scale, 3)
        return lambda rng: Decimal(rng.randint(-(10 ** digits) + 1, 10 ** digits - 1))
    if isinstance(dtype, StringType):
        return lambda rng: "".join(rng.choice("abc") for _ in range(rng.randint(0, 3)))
    if isinstance(dtype, DateType):
        return lambda rng: date(2024, 1, 1) + timedelta(days=rng.randint(0, 365))
    if isinstance(dtype, ArrayType):
        element = _drawer(dtype.elementType)
        if element is None:
            return None
        return lambda rng: [element(rng) for _ in range(rng.randint(0, 4))]
    if isinstance(dtype, StructType):
        fields = [_drawer(f.dataType) for f in dtype.fields]
        if any(f is None for f in fields):
            return None
        return lambda rng: tuple(f(rng) for f in fields if f is not None)
    return None


def _integral(top: int) -> Callable[[random.Random], int]:
    """Small numbers of both signs, and bit patterns up to `top`."""
    return lambda rng: rng.choice([rng.randint(-20, 20), rng.randint(0, top)])


def _show(value: Any) -> str:
    """A sample value as SQL would write it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (list, tuple)):
        return "array(" + ", ".join(_show(v) for v in value) + ")"
    if isinstance(value, dict):
        return "named_struct(" + ", ".join(f"'{k}', {_show(v)}" for k, v in value.items()) + ")"
    if hasattr(value, "asDict"):
        return _show(value.asDict())
    if isinstance(value, date):
        return f"DATE'{value.isoformat()}'"
    return str(value)
