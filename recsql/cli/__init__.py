"""The `recsql` command line: `recsql -f script.sql`, `recsql -e "..."`, or an interactive shell.

`main` is the console entry point (`recsql = "recsql.cli:main"`); `cli` is the click command,
callable in-process (tests use `click.testing.CliRunner` against one SparkSession).
"""

from __future__ import annotations

import sys
import warnings

from recsql.cli.app import cli


def main(argv: list[str] | None = None) -> None:
    """Run the command; exits with 0 ok, 1 query error, 2 usage error, 130 interrupted."""
    warnings.filterwarnings("ignore", category=FutureWarning)  # pyspark's pandas-version notice
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["serve"]:  # `recsql serve ...`: the HiveServer2 server (recsql/cli/serve.py)
        from recsql.cli.serve import serve
        serve.main(args=args[1:], prog_name="recsql serve")
    cli.main(args=argv, prog_name="recsql")


__all__ = ["cli", "main"]
