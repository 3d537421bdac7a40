"""The metadata calls JDBC/ODBC drivers make (GetSchemas, GetTables, GetColumns, ...): each is a
small result set with the JDBC `DatabaseMetaData` columns, read from the session's catalog as
Spark's Thrift server does (temporary views included, with no schema)."""

from __future__ import annotations

import re
from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql import types as T
from TCLIService import ttypes

from recsql.server.rowsets import ColumnSpec

TypeId = ttypes.TTypeId
Rows = list[tuple]


def _string(*names: str) -> list[ColumnSpec]:
    return [ColumnSpec(name, TypeId.STRING_TYPE) for name in names]


def _int(name: str) -> ColumnSpec:
    return ColumnSpec(name, TypeId.INT_TYPE, "i32")


def _short(name: str) -> ColumnSpec:
    return ColumnSpec(name, TypeId.SMALLINT_TYPE, "i16")


def _bool(name: str) -> ColumnSpec:
    return ColumnSpec(name, TypeId.BOOLEAN_TYPE, "bool")


CATALOGS = _string("TABLE_CAT")
SCHEMAS = _string("TABLE_SCHEM", "TABLE_CATALOG")
TABLES = _string("TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "TABLE_TYPE", "REMARKS")
TABLE_TYPES = _string("TABLE_TYPE")
COLUMNS = [
    *_string("TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "COLUMN_NAME"), _int("DATA_TYPE"),
    *_string("TYPE_NAME"), _int("COLUMN_SIZE"), ColumnSpec("BUFFER_LENGTH", TypeId.TINYINT_TYPE, "byte"),
    _int("DECIMAL_DIGITS"), _int("NUM_PREC_RADIX"), _int("NULLABLE"), *_string("REMARKS", "COLUMN_DEF"),
    _int("SQL_DATA_TYPE"), _int("SQL_DATETIME_SUB"), _int("CHAR_OCTET_LENGTH"),
    _int("ORDINAL_POSITION"), *_string("IS_NULLABLE", "SCOPE_CATALOG", "SCOPE_SCHEMA", "SCOPE_TABLE"),
    _short("SOURCE_DATA_TYPE"), *_string("IS_AUTO_INCREMENT"),
]
TYPE_INFO = [
    *_string("TYPE_NAME"), _int("DATA_TYPE"), _int("PRECISION"),
    *_string("LITERAL_PREFIX", "LITERAL_SUFFIX", "CREATE_PARAMS"), _short("NULLABLE"),
    _bool("CASE_SENSITIVE"), _short("SEARCHABLE"), _bool("UNSIGNED_ATTRIBUTE"),
    _bool("FIXED_PREC_SCALE"), _bool("AUTO_INCREMENT"), *_string("LOCAL_TYPE_NAME"),
    _short("MINIMUM_SCALE"), _short("MAXIMUM_SCALE"), _int("SQL_DATA_TYPE"),
    _int("SQL_DATETIME_SUB"), _int("NUM_PREC_RADIX"),
]
FUNCTIONS = [*_string("FUNCTION_CAT", "FUNCTION_SCHEM", "FUNCTION_NAME", "REMARKS"),
             _int("FUNCTION_TYPE"), *_string("SPECIFIC_NAME")]
PRIMARY_KEYS = [*_string("TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "COLUMN_NAME"),
                _int("KEQ_SEQ"), *_string("PK_NAME")]
CROSS_REFERENCE = [
    *_string("PKTABLE_CAT", "PKTABLE_SCHEM", "PKTABLE_NAME", "PKCOLUMN_NAME", "FKTABLE_CAT",
             "FKTABLE_SCHEM", "FKTABLE_NAME", "FKCOLUMN_NAME"),
    _int("KEQ_SEQ"), _int("UPDATE_RULE"), _int("DELETE_RULE"), *_string("FK_NAME", "PK_NAME"),
    _int("DEFERRABILITY"),
]

# java.sql.Types of Spark types (first match wins), and JDBC's column size / decimal digits
JDBC_TYPES: tuple[tuple[type, int, int | None, int | None], ...] = (
    (T.BooleanType, 16, 1, None),
    (T.ByteType, -6, 3, 0),
    (T.ShortType, 5, 5, 0),
    (T.IntegerType, 4, 10, 0),
    (T.LongType, -5, 19, 0),
    (T.FloatType, 6, 7, 7),
    (T.DoubleType, 8, 15, 15),
    (T.DecimalType, 3, None, None),
    (T.CharType, 1, None, None),
    (T.VarcharType, 12, None, None),
    (T.StringType, 12, None, None),
    (T.BinaryType, -2, None, None),
    (T.DateType, 91, 10, None),
    (T.TimestampType, 93, 29, 6),
    (T.TimestampNTZType, 93, 29, 6),
    (T.ArrayType, 2003, None, None),
    (T.StructType, 2002, None, None),
    (T.MapType, 2000, None, None),
    (T.NullType, 0, None, None),
)
TYPE_NAMES = ("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL",
              "STRING", "BINARY", "DATE", "TIMESTAMP", "ARRAY", "MAP", "STRUCT", "VOID")
NUMERIC = {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"}
TYPE_IDS = {"BOOLEAN": 16, "TINYINT": -6, "SMALLINT": 5, "INT": 4, "BIGINT": -5, "FLOAT": 6,
            "DOUBLE": 8, "DECIMAL": 3, "STRING": 12, "BINARY": -2, "DATE": 91, "TIMESTAMP": 93,
            "ARRAY": 2003, "MAP": 2000, "STRUCT": 2002, "VOID": 0}


def pattern(text: str | None) -> re.Pattern[str]:
    """A JDBC search pattern (`%` any, `_` one character, `\\` escapes; Hive's `*` too)."""
    if not text:
        return re.compile(".*", re.DOTALL)
    out, escaped = [], False
    for char in text:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "%*":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


def _databases(spark: SparkSession, schema: str | None) -> list[str]:
    wanted = pattern(schema)
    return [db.name for db in spark.catalog.listDatabases() if wanted.fullmatch(db.name)]


def catalogs(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    return CATALOGS, []  # as Spark's server: names are database-qualified only


def schemas(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    return SCHEMAS, [(name, "") for name in _databases(spark, req.schemaName)]


def table_types(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    return TABLE_TYPES, [("TABLE",), ("VIEW",)]


def _relations(spark: SparkSession, schema: str | None, table: str | None,
               types: list[str] | None = None) -> list[tuple[str | None, str, str, str]]:
    """(schema, name, type, remarks) of the tables and views matching, then the session's
    temporary views (schema None; listed for any schema pattern, as Spark's server does)."""
    wanted = pattern(table)
    kinds = {t.upper() for t in types} if types else None
    found: list[tuple[str | None, str, str, str]] = []
    for db in _databases(spark, schema):
        for t in spark.catalog.listTables(db):
            if t.isTemporary or not wanted.fullmatch(t.name):
                continue
            kind = "VIEW" if (t.tableType or "").upper() == "VIEW" else "TABLE"
            if kinds is None or kind in kinds:
                found.append((db, t.name, kind, t.description or ""))
    if kinds is None or "VIEW" in kinds:
        for t in spark.catalog.listTables():
            if t.isTemporary and not t.namespace and wanted.fullmatch(t.name):
                found.append((None, t.name, "VIEW", t.description or ""))
    return found


def tables(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    rows = [("", db, name, kind, remarks)
            for db, name, kind, remarks in _relations(spark, req.schemaName, req.tableName,
                                                      req.tableTypes)]
    return TABLES, rows


def columns(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    wanted = pattern(req.columnName)
    rows = []
    for db, name, _kind, _remarks in _relations(spark, req.schemaName, req.tableName):
        qualified = f"`{db}`.`{name}`" if db else f"`{name}`"
        try:
            fields = spark.table(qualified).schema.fields
        except Exception:  # noqa: BLE001 - a table that cannot be read (bad files) is skipped
            continue
        for position, field in enumerate(fields, start=1):
            if wanted.fullmatch(field.name):
                rows.append(_column_row(db, name, field, position))
    return COLUMNS, rows


def _column_row(db: str | None, table: str, field: T.StructField, position: int) -> tuple:
    data_type = field.dataType
    jdbc, size, digits = next(((j, s, d) for kind, j, s, d in JDBC_TYPES
                               if isinstance(data_type, kind)), (1111, None, None))
    if isinstance(data_type, T.DecimalType):
        size, digits = data_type.precision, data_type.scale
    radix = 10 if size is not None and jdbc not in (16, 91, 93) else None
    return ("", db, table, field.name, jdbc, data_type.simpleString().upper(), size, None, digits,
            radix, 1 if field.nullable else 0, (field.metadata or {}).get("comment", ""), None,
            None, None, None, position, "YES" if field.nullable else "NO", None, None, None, None,
            "NO")


def type_info(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    rows = []
    for name in TYPE_NAMES:
        numeric = name in NUMERIC
        precision = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19, "FLOAT": 7,
                     "DOUBLE": 15, "DECIMAL": 38}.get(name)
        rows.append((name, TYPE_IDS[name], precision, None, None, None, 1, name == "STRING", 3,
                     not numeric, False, False, None, 0, 38 if name == "DECIMAL" else 0, None,
                     None, 10 if numeric else None))
    return TYPE_INFO, rows


def functions(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    wanted = pattern(req.functionName)
    rows = []
    for function in spark.catalog.listFunctions():
        if wanted.fullmatch(function.name):
            rows.append((None, None, function.name, function.description or "", 1,
                         function.className or function.name))
    return FUNCTIONS, rows


def primary_keys(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    return PRIMARY_KEYS, []  # Spark tables declare no keys


def cross_reference(spark: SparkSession, req) -> tuple[list[ColumnSpec], Rows]:
    return CROSS_REFERENCE, []


Lister = Callable[[SparkSession, object], tuple[list[ColumnSpec], Rows]]
