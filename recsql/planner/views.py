"""Stored recursive views, expanded before planning: each read of one becomes a CTE of the
reading statement holding the view's definition, so the statement plans (and, later, pushes its
filters into the recursion) as if the user had written the WITH clause.

`SELECT Cost FROM sp WHERE Dst = 4`, with `sp` stored as `WITH recursive path (...) AS (...)
SELECT Dst, Cost FROM path`, is planned as

    WITH sp__path (...) AS (...), sp (Dst, Cost) AS (SELECT Dst, Cost FROM sp__path AS path)
    SELECT Cost FROM sp WHERE Dst = 4

The view's own CTEs move to the top-level WITH under names prefixed with the view's, so they
cannot meet the reader's; a view read by a view's definition is expanded the same way."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.parser import parse_statement
from recsql.parser.locate import locate
from recsql.planner.catalog import Catalog, StoredView
from recsql.planner.names import TableName
from recsql.planner.scoping import rename_reads

POSITION_KEYS = ("line", "col", "start", "end")


@dataclass
class Expansion:
    """A statement's query with its recursive views expanded, and the views it read (directly or
    through other views)."""

    query: exp.Query
    views: list[StoredView] = field(default_factory=list)


def expand_views(query: exp.Query, catalog: Catalog, sql: str | None = None) -> Expansion:
    """`query` with every read of a stored recursive view replaced by a CTE of its definition."""
    expansion = Expansion(query)
    _expand(expansion, catalog, sql, reading=())
    return expansion


def _expand(expansion: Expansion, catalog: Catalog, sql: str | None, reading: tuple[str, ...]) -> None:
    query = expansion.query.copy()
    local = {c.alias.lower() for c in query.find_all(exp.CTE)}
    found: dict[TableName, StoredView | None] = {}
    reads: list[tuple[exp.Table, StoredView]] = []
    for table in list(query.find_all(exp.Table)):
        name = _name(table)
        if name is None or (not table.args.get("db") and table.name.lower() in local):
            continue
        if name not in found:
            found[name] = catalog.recursive_view(name)
        view = found[name]
        if view is not None:
            reads.append((table, view))
    if not reads:
        return
    read_ids = {id(t) for t, _ in reads}
    used = local | {t.name.lower() for t in query.find_all(exp.Table) if id(t) not in read_ids}
    ctes: list[exp.CTE] = []
    names: dict[str, str] = {}
    for table, view in reads:
        key = view.name.lower()
        if key in reading:
            raise RecSQLAnalysisError(
                f"View `{view.name}` reads itself through {' -> '.join(reading)}; a view cannot be "
                "defined through itself (write the recursion inside one view's WITH clause)",
                condition="RECSQL_VIEW_CYCLE", **locate(table, sql))
        if key not in names:
            names[key] = _fresh(view.name.split(".")[-1].strip("`"), used)
            ctes += _definition_ctes(view, names[key], catalog, expansion, (*reading, key))
        alias = table.args.get("alias")
        table.replace(exp.Table(
            this=exp.to_identifier(names[key]),
            alias=alias.copy() if alias else exp.TableAlias(this=exp.to_identifier(table.name))))
    with_ = query.args.get("with_")
    if isinstance(with_, exp.With):
        with_.set("expressions", [*ctes, *with_.expressions])
    else:
        query.set("with_", exp.With(expressions=ctes))
    expansion.query = query


def _definition_ctes(view: StoredView, name: str, catalog: Catalog, expansion: Expansion,
                     reading: tuple[str, ...]) -> list[exp.CTE]:
    """The CTEs that define `view` under `name`: its own CTEs, renamed, then its final query."""
    expansion.views.append(view)
    parsed = _parsed_definition(view.text)
    if parsed is None:
        raise RecSQLAnalysisError(
            f"The stored definition of view `{view.name}` is not a query; recreate the view",
            condition="RECSQL_BAD_VIEW_DEFINITION")
    inner = Expansion(parsed.copy())  # the expansion below rewrites its tree
    _expand(inner, catalog, None, reading)
    expansion.views += inner.views
    body = inner.query
    ctes: list[exp.CTE] = []
    with_ = body.args.get("with_")
    if isinstance(with_, exp.With):
        for cte in with_.expressions:
            renamed = f"{name}__{cte.alias}"
            rename_reads(body, cte.alias.lower(), renamed)
            cte.args["alias"].set("this", exp.to_identifier(renamed))
            ctes.append(cte)
        body.set("with_", None)
    columns = [exp.to_identifier(c) for c in view.columns]
    ctes.append(exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(name), columns=columns)))
    return ctes


@functools.lru_cache(maxsize=64)
def _parsed_definition(text: str) -> exp.Query | None:
    """A view's stored text parsed, without positions (they mean nothing in the reader's text),
    or None if it is not a query. Parsed once per text: every statement reading the view expands
    it again, and the same text always parses the same (the reader gets a copy)."""
    body = parse_statement(text).expression
    if not isinstance(body, exp.Query):
        return None
    for node in body.walk():
        for key in POSITION_KEYS:
            node.meta.pop(key, None)
    return body


def _fresh(base: str, used: set[str]) -> str:
    name, n = base, 1
    while name.lower() in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name.lower())
    return name


def _name(table: exp.Table) -> TableName | None:
    """The catalog name a table reference reads (`db.v`), or None for a binding or a function."""
    return TableName.of(table) if isinstance(table.this, exp.Identifier) else None
