"""`%%recsql` (a cell) and `%recsql` (a line): run RaSQL on the notebook's Spark session with a
live view of the fixpoint, then show the result's first rows (docs/notebook.md).

A cell's `;`-separated statements run in order as a script; the last one's result is shown.
All of them are parsed before any runs, so a syntax error anywhere runs nothing. A mistake
recsql reports (a `RecSQLError`) fails the cell with spark-sql's message and the caret under the
cell's own text, without a Python traceback; any other error keeps its traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Iterator
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, needs_local_scope, no_var_expand
from IPython.display import Image, display
from pyspark.sql import SparkSession
from traitlets import Int
from traitlets.config.configurable import Configurable

import recsql
from recsql import IterationStats, RecSQLError, Result
from recsql.notebook import cell as cells
from recsql.notebook import show
from recsql.notebook.live import LiveProgress
from recsql.notebook.options import USAGE, OptionError, Options, parse


class CellError(Exception):
    """A mistake in the cell, as spark-sql prints it: IPython shows `_render_traceback_`'s lines
    in place of a Python traceback, and the cell still fails (Run All stops at it)."""

    def __init__(self, text: str, condition: str) -> None:
        super().__init__(text)
        self.condition = condition

    def _render_traceback_(self) -> list[str]:
        first, *rest = str(self).split("\n")
        return [f"\x1b[1;31m{first}\x1b[0m", *rest]


@magics_class
class RecSQLMagic(Magics, Configurable):
    """`%%recsql [options]` over a cell of SQL, `%recsql [options] SQL` on one line."""

    displaylimit = Int(10, config=True, help="Rows a result shows (-n ROWS sets it for one cell); "
                                              "as jupysql's SqlMagic.displaylimit")

    def __init__(self, shell: Any) -> None:
        Configurable.__init__(self, config=shell.config)
        Magics.__init__(self, shell=shell)
        shell.configurables.append(self)  # `%config RecSQLMagic.displaylimit = 20`

    @no_var_expand
    @needs_local_scope
    @line_cell_magic
    def recsql(self, line: str, cell: str | None = None, local_ns: dict | None = None) -> None:
        try:
            options, sql = parse(line)
        except OptionError as error:
            raise UsageError(str(error)) from None
        if cell is not None:
            if sql:
                raise UsageError(f"%%recsql takes only options on its first line, the SQL below it "
                                 f"(got {sql!r}); {USAGE}")
            sql = cell
        if not sql.strip():
            raise UsageError(f"no SQL to run; {USAGE}")
        user_ns = self.shell.user_ns  # type: ignore[attr-defined]  # set: a registered magic
        last = self.run(options, sql, {**user_ns, **(local_ns or {})})
        if options.output and last is not None:
            user_ns[options.output] = last.df

    def run(self, options: Options, sql: str, namespace: dict[str, Any]) -> Result | None:
        piece = cells.Piece(sql, 0)  # until the cell is split (a tokenizer error is the cell's)
        try:
            pieces = cells.pieces(sql)
            for piece in pieces:  # all parsed before any runs
                cells.check_syntax(piece)
            bound = []
            for piece in pieces:
                bound.append(cells.bindings(piece, namespace))
            spark = notebook_session()
            runs: list[list[IterationStats]] = []
            result = None
            with cancelled_on_interrupt(spark):
                with LiveProgress(spark, display) as live:
                    for piece, values in zip(pieces, bound):
                        text = _explained(piece.text) if options.explain else piece.text
                        result = recsql.run(text, values.args or None, spark=spark,
                                            conf=options.conf or None, progress=live.on_iteration,
                                            **values.kwargs)
                        if result.stats:
                            runs.append(list(result.stats))
                self.show(result, runs, options)
        except RecSQLError as error:
            raise CellError(cells.in_cell(error, piece, sql), error.condition) from None
        return result

    def show(self, result: Result | None, runs: list[list[IterationStats]], options: Options) -> None:
        if result is not None:
            if result.kind == "explain":
                display(show.plan_bundle("\n".join(r[0] for r in result.df.collect())), raw=True)
            elif result.kind != "command" or (result.df.columns and result.df.take(1)):
                limit = self.displaylimit if options.limit is None else options.limit
                display(show.rows_bundle(result.df, limit), raw=True)
        if options.stats:
            display(show.stats_bundle([s for stats in runs for s in stats]), raw=True)
        if options.plot:
            try:
                display(Image(data=show.plot_png(runs), format="png"))
            except ImportError:
                raise UsageError("--plot needs matplotlib: pip install 'recsql[plot]'") from None


def notebook_session() -> SparkSession:
    """The active session, else `recsql.session()`; with SPARK_REMOTE set and none active, a
    Spark Connect session to it (what `SparkSession.builder.getOrCreate()` makes there)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if os.environ.get("SPARK_REMOTE"):
        return SparkSession.builder.getOrCreate()
    return recsql.session()


class Interrupted(KeyboardInterrupt):
    """The kernel was interrupted and the cell's Spark jobs cancelled: one line instead of the
    traceback of wherever the interrupt landed (most often inside Py4J's socket read)."""

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[1;33mKeyboardInterrupt: {self}\x1b[0m"]


@contextlib.contextmanager
def cancelled_on_interrupt(spark: SparkSession) -> Iterator[None]:
    """Tag every Spark job the cell starts; on a kernel interrupt (KeyboardInterrupt) cancel
    them, so that nothing keeps running in the background and the session stays usable."""
    tag = f"recsql-notebook-{uuid.uuid4().hex}"
    spark.addTag(tag)
    try:
        with _quiet_py4j_interrupts():
            yield
    except KeyboardInterrupt:
        spark.interruptTag(tag)
        raise Interrupted("recsql cancelled the cell's Spark jobs; the session is usable") from None
    finally:
        spark.removeTag(tag)


@contextlib.contextmanager
def _quiet_py4j_interrupts() -> Iterator[None]:
    """Py4J logs a KeyboardInterrupt inside a call to the JVM at ERROR, with its traceback (on
    the root logger, then on its own while it drops the connection; the interrupt itself goes
    on): in a notebook that is a screen of red for a click on the stop button."""
    root, py4j = logging.getLogger(), logging.getLogger("py4j")
    interrupted = False

    def not_interrupts(record: logging.LogRecord) -> bool:
        # once interrupted, a call the unwinding makes may find its connection shut by Py4J's
        # clean-up, which it logs as "Exception while sending command." (seen in CI when the
        # interrupt landed inside a call to the JVM); the error itself still propagates
        nonlocal interrupted
        message = str(record.msg)
        if message.startswith("KeyboardInterrupt while sending command"):
            interrupted = True
            return False
        return not (interrupted and message.startswith("Exception while sending command"))

    level = py4j.level
    root.addFilter(not_interrupts)
    py4j.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        root.removeFilter(not_interrupts)
        py4j.setLevel(level)


def _explained(text: str) -> str:
    return text if text.lstrip()[:7].upper() == "EXPLAIN" else "EXPLAIN " + text
