"""The `recsql` command line: `recsql -f script.sql`, `recsql -e "..."`, or an interactive shell.

`main` is the console entry point (`recsql = "recsql.cli:main"`); `cli` is the click command,
callable in-process (tests use `click.testing.CliRunner` against one SparkSession).
"""

from __future__ import annotations

import warnings

from recsql.cli.app import cli


def main(argv: list[str] | None = None) -> None:
    """Run the command; exits with 0 ok, 1 query error, 2 usage error, 130 interrupted."""
    warnings.filterwarnings("ignore", category=FutureWarning)  # pyspark's pandas-version notice
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    cli.main(args=argv, prog_name="recsql")


__all__ = ["cli", "main"]
