"""`--table NAME=PATH[:SCHEMA]`: register a file as a temporary view.

The format comes from the extension (a `.gz`/`.bz2` suffix is looked through; Spark decompresses
by extension); `#` lines are comments; a header line is detected by looking at the first lines.
"""

from __future__ import annotations

import bz2
import gzip
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import IO, Any

import click
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

# extension -> (Spark format, reader options)
FORMATS: dict[str, tuple[str, dict[str, str]]] = {
    ".csv": ("csv", {"sep": ","}),
    ".tsv": ("csv", {"sep": "\t"}),
    ".tab": ("csv", {"sep": "\t"}),
    ".txt": ("csv", {"sep": "\t"}),
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".ndjson": ("json", {}),
    ".parquet": ("parquet", {}),
}
COMPRESSED: dict[str, Callable[..., IO[Any]]] = {".gz": gzip.open, ".bz2": bz2.open}
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXTENSIONS = "|".join(re.escape(e) for e in FORMATS)
_COMPRESSIONS = "|".join(re.escape(e) for e in COMPRESSED)
SPEC = re.compile(rf"^(?P<path>.*?(?:{_EXTENSIONS})(?:{_COMPRESSIONS})?)(?::(?P<schema>.+))?$",
                  re.IGNORECASE)
NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "LONG", "FLOAT", "DOUBLE",
                 "DECIMAL", "BYTE", "SHORT", "REAL", "NUMERIC")
SAMPLE_LINES = 20


@dataclass(frozen=True)
class TableSpec:
    name: str
    path: str
    schema: str | None = None

    @property
    def extension(self) -> str:
        stem, ext = os.path.splitext(self.path.lower())
        return os.path.splitext(stem)[1] if ext in COMPRESSED else ext

    @property
    def format(self) -> tuple[str, dict[str, str]]:
        return FORMATS[self.extension]


def parse_spec(text: str) -> TableSpec:
    """`NAME=PATH[:SCHEMA]`; raises click.BadParameter with what is wrong."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not rest:
        raise click.BadParameter(f"{text!r}: expected NAME=PATH[:SCHEMA]")
    if not NAME.match(name):
        raise click.BadParameter(f"{name!r} is not a table name (letters, digits, _)")
    match = SPEC.match(rest)
    if not match:
        known = ", ".join(FORMATS)
        raise click.BadParameter(f"{rest!r}: unknown file type; known extensions: {known} "
                                 "(optionally .gz or .bz2)")
    path = os.path.expanduser(match.group("path"))
    if "://" not in path and not os.path.exists(path):
        raise click.BadParameter(f"{path}: no such file")
    schema = (match.group("schema") or "").strip() or None
    return TableSpec(name, path, schema)


# -- header detection ---------------------------------------------------------------------------

def sample_lines(path: str, limit: int = SAMPLE_LINES) -> list[str]:
    """The first non-comment, non-blank lines of a local text file (decompressed)."""
    opener: Callable[..., IO[Any]] = COMPRESSED.get(os.path.splitext(path.lower())[1], open)
    if "://" in path or os.path.isdir(path):
        return []
    with opener(path, "rt", encoding="utf-8", errors="replace") as stream:
        lines = (line.rstrip("\r\n") for line in stream)
        return list(islice((ln for ln in lines if ln.strip() and not ln.startswith("#")), limit))


def has_header(lines: list[str], sep: str, schema: str | None) -> bool:
    """A first line is a header when it names the schema's columns, or (no schema) when it holds
    no number while a later line has a number in some column."""
    if not lines:
        return False
    first = [f.strip().strip('"') for f in lines[0].split(sep)]
    if schema:
        names = [c.strip().split()[0].strip("`").lower() for c in schema.split(",") if c.strip()]
        numeric = [_is_numeric_type(c) for c in schema.split(",") if c.strip()]
        if [f.lower() for f in first] == names:
            return True
        return any(n and not NUMBER.match(f) for f, n in zip(first, numeric))
    if any(NUMBER.match(f) for f in first) or len(set(first)) != len(first):
        return False
    rest = [[f.strip().strip('"') for f in line.split(sep)] for line in lines[1:]]
    return any(NUMBER.match(f) for row in rest for f in row) or (not rest and _identifiers(first))


def _is_numeric_type(column: str) -> bool:
    words = column.strip().split()
    return len(words) > 1 and words[1].upper().split("(")[0] in NUMERIC_TYPES


def _identifiers(fields: list[str]) -> bool:
    return all(NAME.match(f) for f in fields)


# -- loading ------------------------------------------------------------------------------------

def reader_options(spec: TableSpec) -> tuple[str, dict[str, str]]:
    fmt, options = spec.format
    options = dict(options)
    if fmt == "csv":
        header = has_header(sample_lines(spec.path), options["sep"], spec.schema)
        options.update(comment="#", header=str(header).lower(),
                       inferSchema=str(spec.schema is None).lower())
    return fmt, options


def load(spark: SparkSession, spec: TableSpec) -> DataFrame:
    fmt, options = reader_options(spec)
    try:
        reader = spark.read.format(fmt).options(**options)
        if spec.schema:
            reader = reader.schema(spec.schema)
        return reader.load(spec.path)
    except PySparkException as error:
        raise click.BadParameter(f"{spec.name}={spec.path}: {_first_line(error)}",
                                 param_hint="--table") from None


def register(spark: SparkSession, spec: TableSpec) -> DataFrame:
    df = load(spark, spec)
    df.createOrReplaceTempView(spec.name)
    return df


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]
