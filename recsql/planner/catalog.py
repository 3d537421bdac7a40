"""What the planner may ask about tables outside the query. The executor backs it with Spark;
planner tests use `DictCatalog`, so planning needs no Spark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class StoredView:
    """A recursive view as the catalog holds it: its recsql definition, a query, and the names of
    its columns (the view's own, in order)."""

    name: str
    text: str
    columns: tuple[str, ...]
    temporary: bool = False


class Catalog(Protocol):
    def columns(self, table: str) -> list[str] | None:
        """Column names of `table`, or None when there is no such table or view."""

    def tables(self) -> list[str]:
        """Known table names, for 'did you mean' suggestions."""

    def recursive_view(self, table: str) -> StoredView | None:
        """The stored recursive view `table` names, or None when it names anything else."""


class DictCatalog:
    def __init__(self, tables: dict[str, list[str]] | None = None,
                 views: dict[str, StoredView] | None = None) -> None:
        self._tables = {name.lower(): list(cols) for name, cols in (tables or {}).items()}
        self._views = {name.lower(): view for name, view in (views or {}).items()}

    def columns(self, table: str) -> list[str] | None:
        view = self._views.get(table.lower())
        return list(view.columns) if view else self._tables.get(table.lower())

    def tables(self) -> list[str]:
        return sorted({*self._tables, *self._views})

    def recursive_view(self, table: str) -> StoredView | None:
        return self._views.get(table.lower())
