"""Result writers: one function per format, chosen from a table, and atomic output files.

Values are rendered by Spark itself (`CAST(x AS STRING)`), so the text matches spark-sql's:
integers as integers, `1.0E10`, `[1, 2]`, `{a -> 1}`; NULL prints as `NULL` except in CSV.
"""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import IO

import click
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType
from rich.console import Console
from rich.table import Table

TABLE_ROWS = 10_000  # the most rows a rich table shows; use --format tsv or --output for more

FORMATS = ("table", "csv", "tsv", "json", "parquet")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".json": "json", ".jsonl": "json",
              ".ndjson": "json", ".parquet": "parquet"}


def choose_format(requested: str | None, output: str | None, terminal: bool) -> str:
    """--format if given, else the output file's extension, else table on a terminal, else tsv."""
    if requested:
        return requested
    if output:
        return EXTENSIONS.get(os.path.splitext(output)[1].lower(), "tsv")
    return "table" if terminal else "tsv"


def default_header(fmt: str, requested: str | None) -> bool:
    """Piped output without --format is spark-sql's: no header. An explicit csv/tsv has one."""
    return requested is not None


# -- rows ---------------------------------------------------------------------------------------

def _positional(df: DataFrame) -> tuple[DataFrame, list[str]]:
    """`df` with columns c0, c1, ... (duplicate names are legal in results) and the real names."""
    names = df.columns
    return df.toDF(*[f"c{i}" for i in range(len(names))]), names


def string_rows(df: DataFrame, null: str = "NULL") -> Iterator[list[str]]:
    """Each row as Spark's own string rendering of its values, streamed partition by partition."""
    plain, _ = _positional(df)
    strings = plain.select([F.col(c).cast("string") for c in plain.columns])
    for row in strings.toLocalIterator():
        yield [null if value is None else value for value in row]


def json_rows(df: DataFrame) -> Iterator[str]:
    plain, names = _positional(df)
    record = F.struct(*[F.col(c).alias(name) for c, name in zip(plain.columns, names)])
    for row in plain.select(F.to_json(record, {"ignoreNullFields": "false"})).toLocalIterator():
        yield row[0]


# -- writers: (df, stream, header) -> rows written ------------------------------------------------

def write_tsv(df: DataFrame, stream: IO[str], header: bool) -> int:
    if header:
        stream.write("\t".join(df.columns) + "\n")
    count = 0
    for count, row in enumerate(string_rows(df), start=1):  # noqa: B007 - the count is returned
        stream.write("\t".join(row) + "\n")
    return count


def write_csv(df: DataFrame, stream: IO[str], header: bool) -> int:
    """RFC 4180 CSV; NULL is an empty field, as in duckdb and Spark's CSV writer."""
    writer = csv.writer(stream, lineterminator="\n")
    if header:
        writer.writerow(df.columns)
    count = 0
    for count, row in enumerate(string_rows(df, null=""), start=1):  # noqa: B007 - returned
        writer.writerow(row)
    return count


def write_json(df: DataFrame, stream: IO[str], header: bool) -> int:
    count = 0
    for count, line in enumerate(json_rows(df), start=1):  # noqa: B007 - the count is returned
        stream.write(line + "\n")
    return count


def table_rows(df: DataFrame) -> list[list[str]]:
    """The rows a rich table shows: at most TABLE_ROWS, plus one to tell there are more."""
    return list(string_rows(df.limit(TABLE_ROWS + 1)))


def print_table(df: DataFrame, rows: list[list[str]], stream: IO[str]) -> int:
    console = Console(file=stream, width=_width(stream), highlight=False)
    table = Table(show_header=True, header_style="bold", show_edge=True)
    for field in df.schema.fields:
        numeric = isinstance(field.dataType, NumericType)
        table.add_column(field.name, justify="right" if numeric else "left", no_wrap=numeric)
    for row in rows[:TABLE_ROWS]:
        table.add_row(*[_cell(v) for v in row])
    console.print(table)
    if len(rows) > TABLE_ROWS:
        click.echo(f"(showing the first {TABLE_ROWS} rows; use --format tsv or --output for all)",
                   err=True)
    return min(len(rows), TABLE_ROWS)


def write_table(df: DataFrame, stream: IO[str], header: bool) -> int:
    return print_table(df, table_rows(df), stream)


def _cell(value: str) -> str:
    return "[dim]NULL[/dim]" if value == "NULL" else value.replace("[", r"\[")


def _width(stream: IO[str]) -> int | None:
    return None if getattr(stream, "isatty", lambda: False)() else 200


TEXT_WRITERS: dict[str, Callable[[DataFrame, IO[str], bool], int]] = {
    "table": write_table,
    "csv": write_csv,
    "tsv": write_tsv,
    "json": write_json,
}


def write_parquet_file(df: DataFrame, path: str) -> int:
    """One Parquet file (not Spark's directory of parts), through Arrow."""
    import pyarrow.parquet as pq

    table = df.toArrow()
    pq.write_table(table, path)
    return table.num_rows


def write_text(df: DataFrame, stream: IO[str], fmt: str, header: bool) -> int:
    if fmt not in TEXT_WRITERS:
        raise click.UsageError(f"--format {fmt} writes a file: give --output PATH")
    return TEXT_WRITERS[fmt](df, stream, header)


# -- atomic files ---------------------------------------------------------------------------------

def check_target(path: str, overwrite: bool) -> None:
    if os.path.exists(path) and not overwrite:
        raise click.UsageError(f"{path} exists; pass --overwrite to replace it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise click.UsageError(f"cannot write {path}: folder {folder} does not exist")


@contextlib.contextmanager
def atomic_path(path: str, overwrite: bool) -> Iterator[str]:
    """A temporary path next to `path`, renamed onto it only when the block succeeds."""
    check_target(path, overwrite)
    folder, name = os.path.split(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".recsql-tmp", dir=folder)
    os.close(handle)
    try:
        yield temporary
        check_target(path, overwrite)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)


def write_file(df: DataFrame, path: str, fmt: str, header: bool, overwrite: bool) -> int:
    with atomic_path(path, overwrite) as temporary:
        if fmt == "parquet":
            return write_parquet_file(df, temporary)
        with open(temporary, "w", encoding="utf-8", newline="") as stream:
            return TEXT_WRITERS[fmt](df, stream, header)
