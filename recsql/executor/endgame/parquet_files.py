"""Parquet files the driver writes itself from Arrow rows, as Spark reads them back: a
materialized view's new version (`recsql.statements.mv_storage.write`), and the state a refresh
finished on the driver, staged for it (`recsql.executor.endgame.seeded`)."""

from __future__ import annotations

import os
import uuid
from typing import Any
from urllib.parse import urlparse

from pyspark.sql.types import StructType

# Spark types (by `typeName`) whose parquet files pyarrow writes as Spark reads them back
ARROW_TYPES = {
    "byte": "int8", "short": "int16", "integer": "int32", "long": "int64", "float": "float32",
    "double": "float64", "string": "string", "boolean": "bool", "date": "date32",
}


def as_written(rows: Any, schema: StructType) -> Any:
    """`rows` (an Arrow table in `schema`'s columns) in the Arrow types of `schema` (DuckDB may
    have widened a column), or None where a type is not one of `ARROW_TYPES` or does not cast."""
    import pyarrow as pa

    types = [ARROW_TYPES.get(f.dataType.typeName()) for f in schema.fields]
    if None in types:
        return None
    arrow = pa.schema([pa.field(f.name, t) for f, t in zip(schema.fields, types)])
    try:
        return rows.rename_columns(arrow.names).cast(arrow)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # never seen: Spark casts as it writes
        return None


def write_parquet(directory: str, rows: Any) -> str:
    """`rows` as one parquet file of `directory`, appearing whole: written under a name Spark
    and DuckDB skip (a leading dot), then renamed (an atomic rename on one file system).
    Returns the file's path."""
    import pyarrow.parquet as pq

    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    hidden, path = os.path.join(directory, f".{name}.writing"), os.path.join(directory, name)
    try:
        pq.write_table(rows, hidden, compression="snappy", use_dictionary=False)
        os.replace(hidden, path)
    finally:
        if os.path.exists(hidden):
            os.remove(hidden)
    return path


def local(uri: str) -> str:
    """A `file:` URI's path (Spark writes `file:/a/b`, or `file:///a/b`)."""
    return urlparse(uri).path
