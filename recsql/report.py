"""What a run's iterations look like to a person, shared by the CLI (`recsql/cli`) and the
notebook magic (`recsql/notebook`): the per-iteration line, the statistics table's columns, and
the convergence figure (delta rows per iteration on a log scale, one line per recursive CTE)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from recsql.executor.loop.stats import IterationStats

# the statistics table's columns: header -> how to show one IterationStats
STATS_COLUMNS: dict[str, Callable[[IterationStats], str]] = {
    "cte": lambda s: s.cte,
    "iteration": lambda s: str(s.iteration),
    "delta rows": lambda s: f"{s.delta_rows:,}",
    "total rows": lambda s: f"{s.total_rows:,}",
    "join": lambda s: s.join_strategy,
    "ran on": lambda s: s.ran_on,
    "seconds": lambda s: f"{s.seconds:.2f}",
}
TEXT_COLUMNS = ("cte", "join", "ran on")  # left-aligned; the others are numbers


def iteration_line(stats: IterationStats) -> str:
    step = "base step" if stats.iteration == 0 else f"iteration {stats.iteration}"
    join = "" if stats.join_strategy == "-" else f", {stats.join_strategy} join"
    return (f"recsql: {stats.cte} {step}: {stats.delta_rows:,} new rows, "
            f"{stats.total_rows:,} total{join}, {stats.seconds:.2f} s")


def series(runs: list[list[IterationStats]]) -> dict[str, list[tuple[int, int]]]:
    """Label -> (iteration, delta rows); a CTE name seen in several statements gets `#n`."""
    lines: dict[str, list[tuple[int, int]]] = defaultdict(list)
    seen: dict[str, int] = defaultdict(int)
    for stats in runs:
        names = dict.fromkeys(s.cte for s in stats)
        labels = {}
        for name in names:
            seen[name] += 1
            labels[name] = name if seen[name] == 1 else f"{name} #{seen[name]}"
        for s in stats:
            lines[labels[s.cte]].append((s.iteration, s.delta_rows))
    return dict(lines)


def convergence_figure(runs: list[list[IterationStats]], size: tuple[float, float] = (8, 4.5)) -> Any:
    """The convergence curve as a matplotlib Figure, drawn off-screen (the caller saves and
    closes it). Raises ImportError without matplotlib (`pip install 'recsql[plot]'`)."""
    from matplotlib import ticker
    from matplotlib.figure import Figure  # not pyplot: no GUI backend, no global figure list

    lines = series(runs)
    figure = Figure(figsize=size, dpi=110)
    axes = figure.subplots()
    for label, points in lines.items():
        axes.plot([p[0] for p in points], [max(p[1], 0) for p in points], marker="o",
                  markersize=3, label=label)
    axes.set_yscale("log", nonpositive="mask")
    peak = max((d for points in lines.values() for _, d in points), default=1)
    axes.set_ylim(0.8, max(10, peak * 1.5))
    axes.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axes.yaxis.set_minor_formatter(ticker.NullFormatter())
    axes.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    axes.set_xlabel("iteration (0 = base step)")
    axes.set_ylabel("delta rows (log scale)")
    axes.set_title("recsql: convergence of the fixpoint")
    axes.grid(True, which="both", alpha=0.3)
    if lines:
        axes.legend(title="recursive CTE")
    else:
        axes.text(0.5, 0.5, "no recursive query ran", ha="center", transform=axes.transAxes)
    figure.tight_layout()
    return figure
