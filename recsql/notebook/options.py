"""The options line of `%%recsql` / `%recsql`: options first, then (on a line magic) the SQL.

Read by hand rather than by argparse: on a line magic the SQL follows the options on the same
line, and shlex-style splitting would mangle its quotes. An unknown option is a one-line usage
error (the magic raises IPython's `UsageError`, which IPython prints without a traceback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

USAGE = ("usage: %%recsql [-o NAME | NAME <<] [-c K=V ...] [--explain] [--stats] [--plot] "
         "[-n ROWS]   (%recsql takes the same options, then the SQL on the same line)")


class OptionError(ValueError):
    """A malformed options line; its text is one line, the usage after it."""


@dataclass
class Options:
    output: str | None = None  # -o NAME: the last statement's DataFrame as NAME in the notebook
    conf: dict[str, str] = field(default_factory=dict)  # -c/--conf K=V: for these statements only
    explain: bool = False  # --explain: EXPLAIN each statement instead of running it
    stats: bool = False  # --stats: the per-iteration statistics table after the run
    plot: bool = False  # --plot: the convergence plot after the run
    limit: int | None = None  # -n/--limit ROWS: rows shown (default: %config RecSQLMagic.displaylimit)


# spelling -> (field, takes a value)
SPELLINGS = {
    "-o": ("output", True), "--output": ("output", True),
    "-c": ("conf", True), "--conf": ("conf", True),
    "--explain": ("explain", False), "--stats": ("stats", False), "--plot": ("plot", False),
    "-n": ("limit", True), "--limit": ("limit", True),
}
_OPTION = re.compile(r"\s*(--?[A-Za-z][\w-]*)(?:=|\s+|$)")
_VALUE = re.compile(r"(\S+)\s*")
_STORE = re.compile(r"\s*([A-Za-z_]\w*)\s*<<\s*")  # jupysql's `name <<`


def parse(line: str) -> tuple[Options, str]:
    """The options at the start of `line`, and the rest of it (the SQL of a line magic)."""
    options, rest = Options(), line
    while True:
        match = _OPTION.match(rest)
        if match is None:  # the SQL (`-- note` is a comment: no letter right after the dashes)
            break
        spelling = match.group(1)
        if spelling not in SPELLINGS:
            raise OptionError(f"unknown option {spelling}; {USAGE}")
        name, takes_value = SPELLINGS[spelling]
        rest = rest[match.end():]
        if not takes_value:
            setattr(options, name, True)
            continue
        value = _VALUE.match(rest)
        if value is None:
            raise OptionError(f"option {spelling} needs a value; {USAGE}")
        rest = rest[value.end():]
        _set(options, spelling, name, value.group(1))
    store = _STORE.match(rest)
    if store is not None:
        options.output, rest = store.group(1), rest[store.end():]
    return options, rest.strip()


def _set(options: Options, spelling: str, name: str, value: str) -> None:
    if name == "conf":
        key, equals, setting = value.partition("=")
        if not equals or not key:
            raise OptionError(f"option {spelling} takes KEY=VALUE, got {value!r}; {USAGE}")
        options.conf[key] = setting
    elif name == "limit":
        if not value.isdigit():
            raise OptionError(f"option {spelling} takes a number of rows, got {value!r}; {USAGE}")
        options.limit = int(value)
    else:
        if not value.isidentifier():
            raise OptionError(f"option {spelling} takes a Python name, got {value!r}; {USAGE}")
        options.output = value
