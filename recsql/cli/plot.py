"""`--plot FILE.png`: the convergence curve, delta rows per iteration on a log scale, one line per
recursive CTE of the run."""

from __future__ import annotations

from collections import defaultdict

import click

from recsql import IterationStats
from recsql.cli.output import atomic_path


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


def draw(runs: list[list[IterationStats]], path: str, overwrite: bool = True) -> int:
    """Write the PNG atomically; returns the number of lines drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError:
        raise click.UsageError("--plot needs matplotlib: pip install 'recsql[plot]'") from None
    lines = series(runs)
    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=110)
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
    with atomic_path(path, overwrite) as temporary:
        figure.savefig(temporary, format="png")
    plt.close(figure)
    return len(lines)
