"""What the planner may ask about tables outside the query. The executor backs it with Spark;
planner tests use `DictCatalog`, so planning needs no Spark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from recsql.planner.model import DeclaredAggregate
from recsql.planner.names import TableName


@dataclass(frozen=True)
class StoredView:
    """A recursive view as the catalog holds it: its recsql definition, a query, and the names of
    its columns (the view's own, in order)."""

    name: str
    text: str
    columns: tuple[str, ...]
    temporary: bool = False


class Catalog(Protocol):
    def columns(self, table: TableName) -> list[str] | None:
        """Column names of `table` resolved as Spark resolves it (a temp view before the
        current schema's table; `db.t` in schema `db`), or None when there is no such table."""

    def tables(self, namespace: tuple[str, ...] = ()) -> list[str]:
        """Table names in `namespace` (the current schema and the temp views if empty), for
        'did you mean' suggestions."""

    def recursive_view(self, table: TableName) -> StoredView | None:
        """The stored recursive view `table` names, or None when it names anything else."""

    def aggregate(self, name: str) -> DeclaredAggregate | None:
        """The head aggregate users declared as `name` (CREATE AGGREGATE), or None."""


class DictCatalog:
    """Tables by name (`edge`, `analytics.edges`), stored recursive views and declared
    aggregates; a table name matches exactly as written, an aggregate's in any case."""

    def __init__(self, tables: dict[str, list[str]] | None = None,
                 views: dict[str, StoredView] | None = None,
                 aggregates: dict[str, DeclaredAggregate] | None = None) -> None:
        self._tables = {TableName.parse(name): list(cols) for name, cols in (tables or {}).items()}
        self._views = {TableName.parse(name): view for name, view in (views or {}).items()}
        self._aggregates = {name.lower(): a for name, a in (aggregates or {}).items()}

    def columns(self, table: TableName) -> list[str] | None:
        view = self._views.get(table)
        return list(view.columns) if view else self._tables.get(table)

    def tables(self, namespace: tuple[str, ...] = ()) -> list[str]:
        depth = len(namespace)
        return sorted({n.parts[-1] for n in (*self._tables, *self._views)
                       if n.key[:-1] == tuple(p.lower() for p in namespace) and len(n.parts) == depth + 1})

    def recursive_view(self, table: TableName) -> StoredView | None:
        return self._views.get(table)

    def aggregate(self, name: str) -> DeclaredAggregate | None:
        return self._aggregates.get(name.lower())
