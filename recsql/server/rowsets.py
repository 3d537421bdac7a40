"""Result encoding: Spark types as HiveServer2 column descriptions, and batches of rows as the
column-based `TRowSet` (protocol V6 and later) with a null bitmap per column.

Dates, timestamps, decimals and intervals travel as strings formatted by Spark (in the session's
time zone), arrays, maps and structs as JSON strings: what Spark's own Thrift server sends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from TCLIService import ttypes

TypeId = ttypes.TTypeId

# Spark type -> (TTypeId, how values travel). First match wins (isinstance).
SPARK_TYPES: tuple[tuple[type, int, str], ...] = (
    (T.BooleanType, TypeId.BOOLEAN_TYPE, "bool"),
    (T.ByteType, TypeId.TINYINT_TYPE, "byte"),
    (T.ShortType, TypeId.SMALLINT_TYPE, "i16"),
    (T.IntegerType, TypeId.INT_TYPE, "i32"),
    (T.LongType, TypeId.BIGINT_TYPE, "i64"),
    (T.FloatType, TypeId.FLOAT_TYPE, "double"),
    (T.DoubleType, TypeId.DOUBLE_TYPE, "double"),
    (T.CharType, TypeId.CHAR_TYPE, "string"),
    (T.VarcharType, TypeId.VARCHAR_TYPE, "string"),
    (T.StringType, TypeId.STRING_TYPE, "string"),
    (T.BinaryType, TypeId.BINARY_TYPE, "binary"),
    (T.DecimalType, TypeId.DECIMAL_TYPE, "cast"),
    (T.DateType, TypeId.DATE_TYPE, "cast"),
    (T.TimestampType, TypeId.TIMESTAMP_TYPE, "cast"),
    (T.TimestampNTZType, TypeId.TIMESTAMP_TYPE, "cast"),
    (T.ArrayType, TypeId.ARRAY_TYPE, "json"),
    (T.MapType, TypeId.MAP_TYPE, "json"),
    (T.StructType, TypeId.STRUCT_TYPE, "json"),
    (T.NullType, TypeId.NULL_TYPE, "cast"),
    (T.DayTimeIntervalType, TypeId.INTERVAL_DAY_TIME_TYPE, "cast"),
    (T.YearMonthIntervalType, TypeId.INTERVAL_YEAR_MONTH_TYPE, "cast"),
)

# how values travel -> (TColumn field, its column class, the filler a null slot holds)
WIRE: dict[str, tuple[str, type, object]] = {
    "bool": ("boolVal", ttypes.TBoolColumn, False),
    "byte": ("byteVal", ttypes.TByteColumn, 0),
    "i16": ("i16Val", ttypes.TI16Column, 0),
    "i32": ("i32Val", ttypes.TI32Column, 0),
    "i64": ("i64Val", ttypes.TI64Column, 0),
    "double": ("doubleVal", ttypes.TDoubleColumn, 0.0),
    "string": ("stringVal", ttypes.TStringColumn, ""),
    "binary": ("binaryVal", ttypes.TBinaryColumn, b""),
    "cast": ("stringVal", ttypes.TStringColumn, ""),
    "json": ("stringVal", ttypes.TStringColumn, ""),
}


@dataclass(frozen=True)
class ColumnSpec:
    """One result column: its name, HiveServer2 type, type qualifiers and wire form."""

    name: str
    type_id: int
    wire: str = "string"
    precision: int | None = None
    scale: int | None = None
    comment: str = ""

    def desc(self, position: int) -> ttypes.TColumnDesc:
        qualifiers = None
        if self.precision is not None:
            qualifiers = ttypes.TTypeQualifiers(qualifiers={
                "precision": ttypes.TTypeQualifierValue(i32Value=self.precision),
                "scale": ttypes.TTypeQualifierValue(i32Value=self.scale or 0),
            })
        entry = ttypes.TPrimitiveTypeEntry(type=self.type_id, typeQualifiers=qualifiers)
        type_desc = ttypes.TTypeDesc(types=[ttypes.TTypeEntry(primitiveEntry=entry)])
        return ttypes.TColumnDesc(columnName=self.name, typeDesc=type_desc, position=position,
                                  comment=self.comment)


def spec_of(field: T.StructField) -> ColumnSpec:
    for kind, type_id, wire in SPARK_TYPES:
        if isinstance(field.dataType, kind):
            if isinstance(field.dataType, T.DecimalType):
                return ColumnSpec(field.name, type_id, wire, field.dataType.precision,
                                  field.dataType.scale)
            return ColumnSpec(field.name, type_id, wire)
    return ColumnSpec(field.name, TypeId.STRING_TYPE, "cast")  # variant, geometry, ...


def specs_of(schema: T.StructType) -> list[ColumnSpec]:
    return [spec_of(field) for field in schema.fields]


def table_schema(specs: Sequence[ColumnSpec]) -> ttypes.TTableSchema:
    return ttypes.TTableSchema(columns=[spec.desc(i + 1) for i, spec in enumerate(specs)])


def wire_frame(df: DataFrame, specs: Sequence[ColumnSpec]) -> DataFrame:
    """`df` with every column in the form it travels in (strings formatted by Spark)."""
    if all(spec.wire not in ("cast", "json") for spec in specs):
        return df
    renamed = df.toDF(*[f"c{i}" for i in range(len(specs))])  # names may repeat
    columns: list[Column] = []
    for i, spec in enumerate(specs):
        column = F.col(f"c{i}")
        if spec.wire == "cast":
            column = column.cast("string")
        elif spec.wire == "json":
            column = F.to_json(column)
        columns.append(column.alias(f"c{i}"))
    return renamed.select(*columns)


def row_set(specs: Sequence[ColumnSpec], rows: Sequence[Sequence], offset: int) -> ttypes.TRowSet:
    """A column-based row set of `rows` (tuples in the wire form) starting at row `offset`."""
    if rows:
        columns = [_column(spec, list(values)) for spec, values in zip(specs, zip(*rows))]
    else:
        columns = [_column(spec, []) for spec in specs]
    return ttypes.TRowSet(startRowOffset=offset, rows=[], columns=columns)


def _column(spec: ColumnSpec, values: list) -> ttypes.TColumn:
    field, column_class, filler = WIRE[spec.wire]
    nulls = bytearray((len(values) + 7) // 8)
    if None in values:
        for i, value in enumerate(values):
            if value is None:
                nulls[i >> 3] |= 1 << (i & 7)
                values[i] = filler
    if spec.wire == "binary":
        values = [bytes(v) for v in values]
    return ttypes.TColumn(**{field: column_class(values=values, nulls=bytes(nulls))})


def log_row_set(lines: Iterable[str], offset: int) -> ttypes.TRowSet:
    return row_set([ColumnSpec("operation_log", TypeId.STRING_TYPE)], [(line,) for line in lines],
                   offset)
