"""The live progress display: one output, updated in place (IPython's `display_id`) while a
cell's statements run, with text/plain and text/html. Per iteration: the CTE, the delta rows,
the total rows, the seconds and where it ran (the driver endgame or Spark), as each iteration
ends (the Spark loop and the driver endgame both report through `recsql.run`'s `progress`).
Within a long iteration, Spark's own stage progress: the status tracker on a classic session
(polled from a thread), the progress handler Spark Connect calls."""

from __future__ import annotations

import contextvars
import html
import threading
import time
from dataclasses import dataclass
from typing import Any

from recsql import IterationStats
from recsql.report import STATS_COLUMNS, TEXT_COLUMNS

SHOWN_ITERATIONS = 8  # the latest iterations the display lists (the rest are counted)
REFRESH_SECONDS = 0.25  # at most this often for stage progress (an iteration's end: at once)
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Stage:
    id: int
    done_tasks: int
    tasks: int


class LiveProgress:
    """The display of one cell's run. Use as a context manager around the statements; pass
    `on_iteration` to `recsql.run(progress=...)`."""

    def __init__(self, spark: Any, display: Any) -> None:
        self.spark = spark
        self.stats: list[IterationStats] = []
        self.stages: tuple[Stage, ...] = ()
        self.started = time.monotonic()
        self.ended: float | None = None
        self.outcome = "running"
        self.lock = threading.Lock()
        self.shown = 0.0
        self.stop = threading.Event()
        self.watcher: threading.Thread | None = None
        self.handler: Any = None  # the Spark Connect progress handler, while registered
        self.handle = display(self.bundle(), raw=True, display_id=True)

    # -- what Spark and recsql report

    def on_iteration(self, stats: IterationStats) -> None:
        with self.lock:
            self.stats.append(stats)
            self.stages = ()
        self.refresh(force=True)

    def on_stages(self, stages: tuple[Stage, ...]) -> None:
        with self.lock:
            self.stages = stages
        self.refresh()

    def __enter__(self) -> LiveProgress:
        tracker = _status_tracker(self.spark)
        if tracker is not None:
            # the thread publishes into this cell's output: it runs in the cell's context
            run = contextvars.copy_context().run
            self.watcher = threading.Thread(target=run, args=(self._poll, tracker), daemon=True,
                                            name="recsql-notebook-progress")
            self.watcher.start()
        else:
            self.handler = self._on_connect_progress
            self.spark.registerProgressHandler(self.handler)
        return self

    def __exit__(self, kind, error, trace) -> None:
        self.stop.set()
        if self.watcher is not None:
            self.watcher.join()
        if self.handler is not None:
            self.spark.removeProgressHandler(self.handler)
        with self.lock:
            self.ended = time.monotonic()
            self.stages = ()
            self.outcome = ("done" if kind is None else
                            "interrupted" if issubclass(kind, KeyboardInterrupt) else "failed")
        self.refresh(force=True)

    def _poll(self, tracker: Any) -> None:
        while not self.stop.wait(POLL_SECONDS):
            try:
                infos = [tracker.getStageInfo(i) for i in sorted(tracker.getActiveStageIds())]
            except Exception:  # noqa: BLE001 - the JVM going away mid-poll only ends the polling
                return
            self.on_stages(tuple(Stage(i.stageId, i.numCompletedTasks, i.numTasks)
                                 for i in infos if i is not None))

    def _on_connect_progress(self, stages, inflight_tasks, operation_id, done) -> None:
        running = () if done else tuple(Stage(s.stage_id, s.num_completed_tasks, s.num_tasks)
                                        for s in stages or () if not s.done)
        self.on_stages(running)

    # -- what a person sees

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.shown < REFRESH_SECONDS:
            return
        self.shown = now
        self.handle.update(self.bundle(), raw=True)

    def bundle(self) -> dict[str, str]:
        with self.lock:
            stats, stages = list(self.stats), self.stages
            seconds = (self.ended or time.monotonic()) - self.started
            outcome = self.outcome
        return {"text/plain": _text(outcome, seconds, stats, stages),
                "text/html": _html(outcome, seconds, stats, stages)}


def _status_tracker(spark: Any) -> Any:
    """A classic session's status tracker; None on Spark Connect (no SparkContext)."""
    try:
        return spark.sparkContext.statusTracker()
    except Exception:  # noqa: BLE001 - Connect: JVM_ATTRIBUTE_NOT_SUPPORTED
        return None


def headline(outcome: str, seconds: float, stats: list[IterationStats]) -> str:
    last = stats[-1] if stats else None
    where = "" if last is None else (
        f" · {last.cte} {'base step' if last.iteration == 0 else f'iteration {last.iteration}'}"
        f" on {last.ran_on}: {last.delta_rows:,} delta rows, {last.total_rows:,} rows")
    word = {"running": "running", "done": "done in", "failed": "failed after",
            "interrupted": "interrupted after"}[outcome]
    tail = " (recsql's Spark jobs were cancelled; the session is usable)" if outcome == "interrupted" else ""
    return f"recsql: {word} {seconds:.1f} s{where}{tail}"


def stage_line(stage: Stage) -> str:
    return f"Spark stage {stage.id}: {stage.done_tasks}/{stage.tasks} tasks"


def _text(outcome: str, seconds: float, stats: list[IterationStats], stages: tuple[Stage, ...]) -> str:
    lines = [headline(outcome, seconds, stats), *("  " + stage_line(s) for s in stages)]
    shown = stats[-SHOWN_ITERATIONS:]
    if shown:
        rows = [list(STATS_COLUMNS)] + [[show(s) for show in STATS_COLUMNS.values()] for s in shown]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        if len(stats) > len(shown):
            lines.append(f"  ({len(stats) - len(shown)} earlier iterations)")
        for row in rows:
            lines.append("  " + "  ".join(
                cell.ljust(w) if header in TEXT_COLUMNS else cell.rjust(w)
                for cell, w, header in zip(row, widths, STATS_COLUMNS)).rstrip())
    return "\n".join(lines)


def _html(outcome: str, seconds: float, stats: list[IterationStats], stages: tuple[Stage, ...]) -> str:
    colour = {"running": "#1565c0", "done": "#2e7d32", "failed": "#c62828", "interrupted": "#ef6c00"}[outcome]
    parts = [f'<div class="recsql-progress" style="font-family:monospace;font-size:12px">'
             f'<div style="color:{colour};font-weight:bold">{html.escape(headline(outcome, seconds, stats))}</div>']
    for stage in stages:
        parts.append(f'<div>{html.escape(stage_line(stage))} '
                     f'<progress value="{stage.done_tasks}" max="{max(stage.tasks, 1)}"></progress></div>')
    shown = stats[-SHOWN_ITERATIONS:]
    if shown:
        parts.append(stats_table(shown, earlier=len(stats) - len(shown)))
    parts.append("</div>")
    return "".join(parts)


def stats_table(stats: list[IterationStats], earlier: int = 0) -> str:
    """The per-iteration statistics as an HTML table (the live display's, and --stats')."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in STATS_COLUMNS)
    body = []
    if earlier:
        body.append(f'<tr><td colspan="{len(STATS_COLUMNS)}" style="text-align:left">'
                    f"({earlier} earlier iterations)</td></tr>")
    for s in stats:
        cells = "".join(f'<td style="text-align:{"left" if h in TEXT_COLUMNS else "right"}">'
                        f"{html.escape(show(s))}</td>" for h, show in STATS_COLUMNS.items())
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="recsql-stats"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
