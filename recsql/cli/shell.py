"""The interactive shell: `recsql>` prompts, statements over several lines ended by `;`, readline
history, and errors that are reported without ending the session."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from sqlglot.tokens import TokenType

from recsql import RecSQLParseError
from recsql.parser import tokenize

PROMPT = "recsql> "
CONTINUE = "      > "
EXITS = {"exit", "quit", "\\q"}
HISTORY = os.environ.get("RECSQL_HISTORY", "~/.recsql_history")
BANNER = ("recsql {version}: RaSQL recursive queries on Spark {spark}. End statements with ';'. "
          "Type exit to leave.")


def complete(text: str) -> bool:
    """The buffer ends with a top-level `;` (an open string or comment is not complete)."""
    try:
        tokens = tokenize(text)
    except RecSQLParseError:  # an unterminated string or comment: keep reading
        return False
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def is_exit(line: str) -> bool:
    return line.strip().rstrip(";").strip().lower() in EXITS


class Shell:
    """Reads statements and hands each complete buffer to `run` (which reports its own errors);
    `interrupted` is called when Ctrl-C stops a running statement."""

    def __init__(self, run: Callable[[str], None], interrupted: Callable[[], None],
                 history: str = HISTORY) -> None:
        self.run = run
        self.interrupted = interrupted
        self.history = os.path.expanduser(history)

    def loop(self) -> None:
        with self.readline():
            buffer: list[str] = []
            while True:
                try:
                    line = input(CONTINUE if buffer else PROMPT)
                except EOFError:
                    print()
                    return
                except KeyboardInterrupt:  # at the prompt: drop the statement being typed
                    print("^C")
                    buffer = []
                    continue
                if not buffer and is_exit(line):
                    return
                buffer = self.feed(buffer, line)

    def feed(self, buffer: list[str], line: str) -> list[str]:
        if not buffer and not line.strip():
            return []
        text = "\n".join([*buffer, line])
        if not complete(text):
            return [*buffer, line] if _has_tokens(text) else []
        try:
            self.run(text)
        except KeyboardInterrupt:
            self.interrupted()
        return []

    @contextlib.contextmanager
    def readline(self):
        try:
            import readline
        except ImportError:  # Windows without pyreadline: no history, still a shell
            yield
            return
        with contextlib.suppress(OSError):
            readline.read_history_file(self.history)
        readline.set_history_length(1000)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                readline.write_history_file(self.history)


def _has_tokens(text: str) -> bool:
    try:
        return bool(tokenize(text))
    except RecSQLParseError:
        return True
