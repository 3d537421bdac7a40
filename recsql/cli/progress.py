"""Everything the CLI says on standard error: notices, warnings, timings, per-iteration log lines,
the live progress line and the --stats table. Standard output only ever carries result rows."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from recsql import IterationStats
from recsql.report import STATS_COLUMNS, TEXT_COLUMNS, iteration_line

OnIteration = Callable[[IterationStats], None]


class Reporter:
    """Standard error, plain text (never rich markup: error texts hold `[CONDITION]`)."""

    def __init__(self, silent: bool = False, verbose: bool = False,
                 console: Console | None = None) -> None:
        self.silent = silent
        self.verbose = verbose
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)

    @property
    def terminal(self) -> bool:
        return self.console.is_terminal

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def notice(self, text: str) -> None:
        if not self.silent:
            self.say(text)

    def warning(self, text: str) -> None:
        self.say(f"WARNING: {text}")

    def error(self, text: str) -> None:
        self.say(text)

    def timing(self, seconds: float, rows: int | None) -> None:
        fetched = f", Fetched {rows} row(s)" if rows is not None else ""
        self.notice(f"Time taken: {seconds:.3f} seconds{fetched}")

    def stats(self, stats: list[IterationStats]) -> None:
        if not stats:
            return
        table = Table(title="iterations", title_justify="left", show_edge=True)
        for header in STATS_COLUMNS:
            table.add_column(header, justify="left" if header in TEXT_COLUMNS else "right")
        for row in stats:
            table.add_row(*[show(row) for show in STATS_COLUMNS.values()])
        self.console.print(table, markup=False)

    @contextlib.contextmanager
    def progress(self, label: str) -> Iterator[OnIteration]:
        """The per-iteration callback for one statement: a live line on a terminal (unless -S),
        a log line per iteration with -v."""
        live = self.terminal and not self.silent
        bar = _Bar(self.console, label) if live else None
        with bar if bar is not None else contextlib.nullcontext():
            yield lambda stats: self._on_iteration(stats, bar)

    def _on_iteration(self, stats: IterationStats, bar: _Bar | None) -> None:
        if self.verbose:
            self.say(iteration_line(stats))
        if bar is not None:
            bar.update(stats)


class _Bar:
    """An indeterminate progress line: the CTE, its iteration, the delta size, elapsed time."""

    def __init__(self, console: Console, label: str) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
            console=console, transient=True,
        )
        self.task = self.progress.add_task(label, total=None)

    def __enter__(self) -> None:
        self.progress.start()

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def update(self, stats: IterationStats) -> None:
        text = f"{stats.cte}: iteration {stats.iteration}, delta {stats.delta_rows:,} rows"
        self.progress.update(self.task, description=text)
