"""What the planner may ask about tables outside the query. The executor backs it with Spark;
planner tests use `DictCatalog`, so planning needs no Spark."""

from __future__ import annotations

from typing import Protocol

from recsql.planner.names import TableName


class Catalog(Protocol):
    def columns(self, table: TableName) -> list[str] | None:
        """Column names of `table` resolved as Spark resolves it (a temp view before the
        current schema's table; `db.t` in schema `db`), or None when there is no such table."""

    def tables(self, namespace: tuple[str, ...] = ()) -> list[str]:
        """Table names in `namespace` (the current schema and the temp views if empty), for
        'did you mean' suggestions."""


class DictCatalog:
    """Tables by name (`edge`, `analytics.edges`); a name matches exactly as written."""

    def __init__(self, tables: dict[str, list[str]] | None = None) -> None:
        self._tables = {TableName.parse(name): list(cols) for name, cols in (tables or {}).items()}

    def columns(self, table: TableName) -> list[str] | None:
        return self._tables.get(table)

    def tables(self, namespace: tuple[str, ...] = ()) -> list[str]:
        depth = len(namespace)
        return sorted(n.parts[-1] for n in self._tables
                      if n.key[:-1] == tuple(p.lower() for p in namespace) and len(n.parts) == depth + 1)
