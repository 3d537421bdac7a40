"""What the planner may ask about tables outside the query. The executor backs it with Spark;
planner tests use `DictCatalog`, so planning needs no Spark."""

from __future__ import annotations

from typing import Protocol


class Catalog(Protocol):
    def columns(self, table: str) -> list[str] | None:
        """Column names of `table`, or None when there is no such table or view."""

    def tables(self) -> list[str]:
        """Known table names, for 'did you mean' suggestions."""


class DictCatalog:
    def __init__(self, tables: dict[str, list[str]] | None = None) -> None:
        self._tables = {name.lower(): list(cols) for name, cols in (tables or {}).items()}

    def columns(self, table: str) -> list[str] | None:
        return self._tables.get(table.lower())

    def tables(self) -> list[str]:
        return sorted(self._tables)
