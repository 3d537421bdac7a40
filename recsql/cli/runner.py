"""Running scripts statement by statement: results to stdout (or the --output file), everything
else to stderr through the Reporter."""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import IO, Any

from pyspark.sql import DataFrame, SparkSession

import recsql
from recsql import IterationStats, Result
from recsql.cli import output
from recsql.cli.progress import Reporter
from recsql.cli.script import Source, rewrite_paths
from recsql.parser import split_statements


@dataclass
class Sink:
    """Where the last statement's result goes with --output."""

    path: str
    format: str
    header: bool
    overwrite: bool


@dataclass
class ScriptRunner:
    """Runs a script statement by statement for the `recsql` command: each result printed (or
    written to the --output sink), statistics and errors through the Reporter."""

    spark: SparkSession
    reporter: Reporter
    format: str
    header: bool
    recsql_conf: dict[str, Any] = field(default_factory=dict)
    show_stats: bool = False
    resume: bool = False  # --resume: continue from the checkpoints of an interrupted run
    stdout: IO[str] | None = None
    runs: list[list[IterationStats]] = field(default_factory=list)

    @property
    def out(self) -> IO[str]:
        return self.stdout or sys.stdout

    def run_source(self, source: Source, *, sink: Sink | None = None, show: bool = True) -> None:
        """Every statement of `source` in order; `sink` receives the last statement's result."""
        statements = split_statements(source.text)
        for index, statement in enumerate(statements):
            last = index == len(statements) - 1
            self.run_statement(rewrite_paths(_strip_blank_lines(statement), source.base),
                               sink=sink if last else None, show=show)
        if sink is not None and not statements:
            self.reporter.warning(f"{source.name} holds no statement; {sink.path} not written")

    def run_statement(self, statement: str, *, sink: Sink | None = None, show: bool = True) -> None:
        if self.reporter.verbose:
            self.reporter.say(statement.strip())
        started = time.monotonic()
        with self.reporter.progress(_label(statement)) as on_iteration, _warnings_to(self.reporter):
            result = recsql.run(statement, spark=self.spark, conf=self.recsql_conf or None,
                                progress=on_iteration, resume=self.resume)
            rows = self.emit(result, sink, show)
        if callable(rows):  # a table: printed once the progress line is gone
            rows = rows()
        self.reporter.timing(time.monotonic() - started, rows)
        if result.stats:
            self.runs.append(list(result.stats))
            if self.show_stats:
                self.reporter.stats(result.stats)

    def emit(self, result: Result, sink: Sink | None, show: bool):
        """Rows written, or (for a table, shown after the progress line) a function writing
        them; None when the statement has no rows to show."""
        if sink is not None:
            return self.write_sink(result, sink)
        if not show:
            return None
        if result.kind == "explain":
            return self.print_plan(result.df)
        if result.kind == "command" and (not result.df.columns or not result.df.take(1)):
            return None
        if self.format == "table":
            rows = output.table_rows(result.df)
            return lambda: output.print_table(result.df, rows, self.out)
        return output.write_text(result.df, self.out, self.format, self.header)

    def write_sink(self, result: Result, sink: Sink) -> int | None:
        if result.kind == "command" and not result.df.take(1):
            self.reporter.warning(f"the last statement returned no rows; {sink.path} not written")
            return None
        rows = output.write_file(result.df, sink.path, sink.format, sink.header, sink.overwrite)
        self.reporter.notice(f"Wrote {rows} row(s) to {sink.path}")
        return rows

    def print_plan(self, df: DataFrame) -> int:
        lines = [row[0] for row in df.collect()]
        self.out.write("\n".join(line.rstrip("\n") for line in lines) + "\n")
        self.out.flush()
        return len(lines)


def _label(statement: str, width: int = 48) -> str:
    text = " ".join(statement.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _strip_blank_lines(statement: str) -> str:
    """Drop the blank lines a statement starts with (the text after the previous `;`)."""
    lines = statement.split("\n")
    while len(lines) > 1 and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


class _warnings_to:
    """Python warnings raised while a statement runs (e.g. a view kept for the session) become
    `WARNING:` lines on stderr."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.catcher = warnings.catch_warnings(record=True)

    def __enter__(self) -> None:
        self.caught = self.catcher.__enter__()
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)

    def __exit__(self, *exc) -> None:
        self.catcher.__exit__(*exc)
        for caught in self.caught:
            self.reporter.warning(str(caught.message))
