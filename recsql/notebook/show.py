"""What a person reads after a cell ran: the result's first rows (with the row count when the
fetch saw them all, `N+ rows` otherwise: no Spark job runs only to count), the plan of an
EXPLAIN, the statistics table, the convergence plot."""

from __future__ import annotations

import html
import io
import re
from typing import Any

from recsql import IterationStats
from recsql.notebook.live import stats_table
from recsql.report import STATS_COLUMNS, TEXT_COLUMNS, convergence_figure


def rows_bundle(df: Any, limit: int) -> dict[str, str]:
    """The first `limit` rows of `df` (one Spark job, fetching `limit + 1` rows to know whether
    there are more) as an HTML table and aligned text."""
    columns = list(df.columns)
    fetched = df.limit(limit + 1).collect() if limit else []
    more = len(fetched) > limit or (limit == 0 and bool(df.take(1)))
    shown = [[_cell(v) for v in row] for row in fetched[:limit]]
    count = f"{limit:,}+ rows" if more else f"{len(shown):,} row{'' if len(shown) == 1 else 's'}"
    caption = count + (f" (first {limit:,} shown; -n ROWS or %config RecSQLMagic.displaylimit shows more)"
                       if more else "")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in shown)
    table = (f'<table class="recsql-rows"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
             f'<div style="font-size:12px;color:#555">{html.escape(caption)}</div>')
    return {"text/plain": _aligned(columns, shown) + f"\n{caption}", "text/html": table}


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(value)


def _aligned(header: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    right = right or set()
    return "\n".join("  ".join(c.rjust(w) if i in right else c.ljust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in table)


# a plan section's title (`== Recursive plan ==`) and the lines worth a glance in it
_SECTION = re.compile(r"^== .* ==$")
_MARKED = re.compile(r"^\s*(demand|stratum|final query|delta rule|base .* pre-partitioned)")


def plan_bundle(text: str) -> dict[str, str]:
    """An EXPLAIN's text: each `== section ==` a heading, the lines naming demand pushes and the
    chosen path in bold, everything else as Spark prints it (monospaced)."""
    parts = []
    for line in text.splitlines():
        escaped = html.escape(line)
        if _SECTION.match(line.strip()):
            parts.append(f'<div style="font-weight:bold;color:#1565c0;margin-top:6px">{escaped}</div>')
        elif _MARKED.match(line):
            parts.append(f"<div><b>{escaped}</b></div>")
        else:
            parts.append(f"<div>{escaped or '&nbsp;'}</div>")
    body = "".join(parts)
    return {"text/plain": text,
            "text/html": f'<div class="recsql-plan" style="font-family:monospace;white-space:pre;'
                         f'font-size:12px">{body}</div>'}


def stats_bundle(stats: list[IterationStats]) -> dict[str, str]:
    right = {i for i, h in enumerate(STATS_COLUMNS) if h not in TEXT_COLUMNS}
    text = _aligned(list(STATS_COLUMNS), [[show(s) for show in STATS_COLUMNS.values()] for s in stats], right)
    return {"text/plain": text, "text/html": stats_table(stats)}


def plot_png(runs: list[list[IterationStats]]) -> bytes:
    """The convergence plot as PNG bytes (ImportError without matplotlib)."""
    figure = convergence_figure(runs)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()
