"""`--plot FILE.png`: the convergence curve (`recsql.report.convergence_figure`), written atomically."""

from __future__ import annotations

import click

from recsql import IterationStats
from recsql.cli.output import atomic_path
from recsql.report import convergence_figure, series


def draw(runs: list[list[IterationStats]], path: str, overwrite: bool = True) -> int:
    """Write the PNG atomically; returns the number of lines drawn."""
    try:
        figure = convergence_figure(runs)
    except ImportError:
        raise click.UsageError("--plot needs matplotlib: pip install 'recsql[plot]'") from None
    with atomic_path(path, overwrite) as temporary:
        figure.savefig(temporary, format="png")
    return len(series(runs))
