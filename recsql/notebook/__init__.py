"""The notebook face of recsql: `%load_ext recsql`, then `%%recsql` cells and `%recsql` lines
(docs/notebook.md). On the public package only, like the CLI; IPython loads when the extension
does, never with `import recsql`.

    magic.py    the magics: options, the cell's statements run as a script, the outputs
    options.py  the options line (`-o NAME`, `-c K=V`, `--explain`, `--stats`, `--plot`, ...)
    cell.py     the cell's text: its statements, their `{name}` and `:name` values from the
                user's namespace, and a mistake's position mapped back to the cell
    live.py     the live progress display, updated in place as the fixpoint runs
    show.py     what a person reads after the run: the rows, the plan, the statistics, the plot
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics with IPython (called by `%load_ext recsql`)."""
    from recsql.notebook.magic import RecSQLMagic

    ipython.register_magics(RecSQLMagic(ipython))
