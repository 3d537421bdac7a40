"""Spark's type rules as recsql models them, in one place: which types a comparison may mix (the
families), what sum() returns, which types Spark can order, a type spelled as Spark SQL, and a
UNION's widening (Spark's own, asked of Spark), a value Spark computed as a constant of its type.
The analysis stage (`analysis.py`), the plain
branch typing (`plain_types.py`), what the driver endgame may evaluate (`driver_sql.py`) and the
endgame's DuckDB translation (`endgame/translate.py`) read them here."""

from __future__ import annotations

import datetime
import math
import weakref
from typing import Any

from pyspark.errors import AnalysisException
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
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)
from sqlglot import exp
from sqlglot.errors import SqlglotError

INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
NUMBERS = (*INTEGRAL, FloatType, DoubleType, DecimalType)
# the integral types as sqlglot names them (a DuckDB head type, `endgame/translate.py`)
INTEGRAL_SQL = (exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
                exp.DataType.Type.BIGINT)

# The families a comparison keeps apart (a number never equals a string without a cast whose
# rules differ between engines), by the type names DuckDB reports for an operand
_FAMILIES = {
    "TINYINT": "number", "SMALLINT": "number", "INTEGER": "number", "BIGINT": "number",
    "FLOAT": "number", "DOUBLE": "number", "VARCHAR": "string", "BOOLEAN": "boolean",
    "DATE": "date", "NULL": "null", '"NULL"': "null",
}


def family(dtype: DataType) -> str | None:
    """The comparison family of a Spark type: number, string (UTF8_BINARY only: no collation to
    clash), boolean or date; None for any other type."""
    if isinstance(dtype, NUMBERS):
        return "number"
    if type(dtype) is StringType and dtype == StringType():
        return "string"
    if isinstance(dtype, BooleanType):
        return "boolean"
    if isinstance(dtype, DateType):
        return "date"
    return None


def family_of_name(name: str) -> str | None:
    """The comparison family of a type as DuckDB names it (upper case), or None."""
    return "number" if name.startswith("DECIMAL(") else _FAMILIES.get(name)


def sum_type(dtype: DataType) -> DataType:
    """Spark's sum() result types: integral -> BIGINT, decimal(p, s) -> decimal(38, s)."""
    if isinstance(dtype, INTEGRAL):
        return LongType()
    if isinstance(dtype, DecimalType):
        return DecimalType(38, dtype.scale)
    return dtype


def orderable(dtype: DataType) -> bool:
    """Whether Spark can order (and so compare) values of `dtype`: not a map or a variant, nor a
    struct or array holding one."""
    if isinstance(dtype, (MapType, VariantType)):
        return False
    if isinstance(dtype, ArrayType):
        return orderable(dtype.elementType)
    if isinstance(dtype, StructType):
        return all(orderable(f.dataType) for f in dtype.fields)
    return True


def castable(dtype: DataType) -> bool:
    """Whether `CAST(NULL AS t)` has exactly the type `dtype`: a cast's arrays, maps and structs
    hold nulls (`ARRAY<STRING>` is `containsNull=true`), so a type that says its elements cannot be
    null (Spark's `array(...)` of non-null values) cannot be spelled."""
    if isinstance(dtype, ArrayType):
        return dtype.containsNull and castable(dtype.elementType)
    if isinstance(dtype, MapType):
        return dtype.valueContainsNull and castable(dtype.keyType) and castable(dtype.valueType)
    if isinstance(dtype, StructType):
        return all(f.nullable and castable(f.dataType) for f in dtype.fields)
    return True


def quoted(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("spark")


def type_sql(dtype: DataType) -> str:
    """`dtype` as Spark SQL, struct field names back-quoted: `simpleString` leaves them bare, and
    a SEARCH column's `*DEPTH*` field (PostgreSQL's name) then does not parse."""
    if isinstance(dtype, StructType):
        fields = [f"{quoted(f.name)}: {type_sql(f.dataType)}" for f in dtype.fields]
        return f"STRUCT<{', '.join(fields)}>"
    if isinstance(dtype, ArrayType):
        return f"ARRAY<{type_sql(dtype.elementType)}>"
    if isinstance(dtype, MapType):
        return f"MAP<{type_sql(dtype.keyType)}, {type_sql(dtype.valueType)}>"
    return dtype.simpleString()


def empty(spark: SparkSession, schema: StructType) -> DataFrame:
    """No rows of `schema`'s names and types (every column nullable), for a state before its
    first merge.

    Built once per session and schema and reused (a DataFrame is an immutable plan): every
    statement builds two or three (the states, the empty delta after the driver endgame), and
    `recsql serve` gives every client connection a session of its own, so a BI tool's every
    query builds them anew. Spelled as one `selectExpr` of casts where the types can be spelled:
    Column nodes cost a Py4J round trip each, and three empty relations of two or three columns
    took a new session 129 ms that way against 72 ms as `selectExpr` (local[1], medians of 20).
    A type with a non-nullable field inside (`castable`) cannot be spelled as SQL, so it keeps
    its Column cast.

    Not `createDataFrame([], schema)`: that scans a parallelized collection, whose tasks cost
    the base step 0.05-0.09 s (local[2], Spark loop, medians of 9 interleaved runs: the base
    step of SSSP at RMAT 2^16 0.201 -> 0.149 s, of CC 0.435 -> 0.344 s; whole runs 0.95x, and
    0.91x for SSSP at RMAT 2^8). Nor an empty local relation (`.limit(0)`, Arrow): the optimizer
    drops it from the merge's union and renames the union's output, the checkpoint records its
    partitioning under names it does not output, and the next iteration shuffles the state and
    its delta again (tests/executor/test_placement.py). An empty range is neither."""
    kept = _EMPTY.setdefault(spark, {})
    key = schema.json()
    if key not in kept:
        if all(castable(f.dataType) for f in schema.fields):
            kept[key] = spark.range(0).selectExpr(*null_columns(schema))
        else:
            kept[key] = spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])
    return kept[key]


_EMPTY: weakref.WeakKeyDictionary[SparkSession, dict[str, DataFrame]] = weakref.WeakKeyDictionary()


def null_columns(schema: StructType) -> list[str]:
    """A NULL of each of `schema`'s columns, named and typed as Spark SQL (every type `castable`)."""
    return [f"CAST(NULL AS {type_sql(f.dataType)}) AS {quoted(f.name)}" for f in schema.fields]


def widened(spark: SparkSession, known: list[DataType], new: list[DataType]) -> list[DataType] | None:
    """Spark's own UNION type widening of two rows of types (rule 3 of docs/dialect.md section
    3), asked of Spark's analysis (no job); None when Spark finds no common types."""
    if known == new:
        return new
    try:
        return [f.dataType for f in empty(spark, struct(known)).union(empty(spark, struct(new))).schema.fields]
    except AnalysisException:
        return None


def struct(types: list[DataType]) -> StructType:
    return StructType([StructField(f"c{i}", t, True) for i, t in enumerate(types)])


# What marks a constant `constant` spelled (in the node's meta, which copies keep): the driver's
# allowlist admits it as a constant, not as the CAST it is written with (`endgame/driver_sql.py`)
CONSTANT = "recsql_constant"
_EPOCH = datetime.datetime(1970, 1, 1)


def constant(value: Any, dtype: DataType) -> exp.Expr | None:
    """`value`, a value of Spark type `dtype` as `collect` gives it (a TIMESTAMP's as its
    microseconds since the epoch, `unix_micros`: `collect` would shift it to this process's time
    zone), as a SQL constant Spark reads as exactly that value of exactly that type; None for a
    type or value it is not spelled for. A number is written as a string cast to its type (a
    DOUBLE's shortest round-trip digits, a DECIMAL's plain digits): Spark's and DuckDB's casts
    from a string are exact (correctly rounded, for a DOUBLE), and a DECIMAL(p, s) or a BIGINT
    keep their type, which a bare literal would not (`1.50` is DECIMAL(3, 2), `5` an INT). A
    TIMESTAMP is written in UTC with its offset, so the session's time zone cannot make it
    ambiguous (the hour a clock turned back repeats)."""
    if value is None:
        spelled = _typed(exp.null(), dtype) if _spelled_type(dtype) else None
    else:
        spelled = _spelled(value, dtype)
    if spelled is not None:
        spelled.meta[CONSTANT] = True
    return spelled


def is_constant(node: exp.Expr) -> bool:
    """Whether `node` is a constant `constant` spelled."""
    return bool(node.meta.get(CONSTANT))


def _spelled_type(dtype: DataType) -> bool:
    return isinstance(dtype, (BooleanType, *NUMBERS, DateType, TimestampType, TimestampNTZType)) \
        or family(dtype) == "string"


def _spelled(value: Any, dtype: DataType) -> exp.Expr | None:
    if isinstance(dtype, BooleanType):
        return exp.Boolean(this=bool(value))
    if isinstance(dtype, INTEGRAL):
        return _typed(exp.Literal.number(str(int(value))), dtype)
    if isinstance(dtype, (FloatType, DoubleType)):
        text = ("NaN" if math.isnan(value) else "Infinity" if value == math.inf
                else "-Infinity" if value == -math.inf else repr(float(value)))
        return _typed(exp.Literal.string(text), dtype)
    if isinstance(dtype, DecimalType):
        return _typed(exp.Literal.string(format(value, "f")), dtype)
    if family(dtype) == "string":
        return exp.Literal.string(value)
    if isinstance(dtype, DateType):
        return _typed(exp.Literal.string(value.isoformat()), dtype)
    if isinstance(dtype, TimestampNTZType):
        return _typed(exp.Literal.string(value.isoformat(sep=" ")), dtype)
    if isinstance(dtype, TimestampType):
        try:
            utc = _EPOCH + datetime.timedelta(microseconds=value)
        except OverflowError:  # beyond Python's years 1 to 9999
            return None
        return _typed(exp.Literal.string(utc.isoformat(sep=" ") + "+00:00"), dtype)
    return None


def _typed(value: exp.Expr, dtype: DataType) -> exp.Expr | None:
    try:
        to = exp.DataType.build(type_sql(dtype), dialect="spark")
    except SqlglotError:
        return None
    return exp.Cast(this=value, to=to)


__all__ = ["CONSTANT", "INTEGRAL", "INTEGRAL_SQL", "NUMBERS", "castable", "constant", "empty", "family",
           "family_of_name", "is_constant", "null_columns", "orderable", "quoted", "struct", "sum_type",
           "type_sql", "widened"]
