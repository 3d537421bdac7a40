"""The SQL-standard SEARCH and CYCLE clauses, rewritten away before planning as PostgreSQL
rewrites them (src/backend/rewrite/rewriteSearchCycle.c): the CTE becomes a plain recursive CTE
with the extra columns, which the planner and the executor run as any other recursion.

For `WITH RECURSIVE t (c1, c2, c3) AS (anchor UNION [ALL] recursive)`:

- `SEARCH BREADTH FIRST BY c1, c2 SET seq` adds `seq = STRUCT(depth, c1, c2)`: depth 0 in the
  anchor, the read row's depth + 1 in the recursive term (PostgreSQL's `ROW(depth, c1, c2)`);
- `SEARCH DEPTH FIRST BY c1, c2 SET seq` adds `seq = ARRAY(STRUCT(c1, c2))` in the anchor and
  `CONCAT(t.seq, ARRAY(STRUCT(c1, c2)))` in the recursive term (the path of the rows seen);
- `CYCLE c1, c2 SET mark [TO v DEFAULT d] USING path` adds `mark` (d in the anchor; v where the
  new row's `STRUCT(c1, c2)` is already on the path it extends) and `path` (as the depth-first
  seq); the recursive term reads only rows whose mark is not v, so the row that closes a cycle is
  emitted with the mark set and not expanded further.

Spark orders structs field by field and arrays element by element with a prefix first, so
`ORDER BY seq` orders as PostgreSQL orders its records and arrays of records.

The anchor is wrapped as `SELECT c1, c2, c3, <extras> FROM (anchor) AS __search_cycle(c1, c2, c3)`,
and the recursive term as `SELECT c1, c2, c3, <extras> FROM (SELECT <its list>, t.seq, t.mark,
t.path FROM ...) AS __search_cycle(c1, c2, c3, seq, mark, path) WHERE mark <> v`, both as in
PostgreSQL. Misuse gets PostgreSQL's own error cases, with line and position.

A leaf: it imports no other planner module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.parser.dialect import AggregateColumn, CycleClause, SearchClause
from recsql.parser.locate import locate
from recsql.planner.branches import sources

DEPTH_FIELD = "*DEPTH*"  # PostgreSQL's name for the breadth-first depth inside the seq record
WRAPPER = "__search_cycle"  # the derived tables that wrap the anchor and the recursive term

# The CTE's SEARCH and CYCLE columns as (name, clause, where written) in its meta, for the planner's
# `CTEPlan.compared`: their types are known only once the executor types the anchor.
COMPARED = "search_cycle_columns"

# `columns_of(cte)`: the names of a CTE's columns as written (its column list, or else its
# anchor's output names); the planner answers it, with `*` expanded over the catalog.
ColumnsOf = Callable[[exp.CTE], list[str]]


@dataclass
class _Clauses:
    """The clauses of one CTE, checked, with the names the rewrite adds."""

    cte: exp.CTE
    columns: list[str]
    search: SearchClause | None
    cycle: CycleClause | None

    @property
    def added(self) -> list[str]:
        names = [self.search.name] if self.search else []
        if self.cycle:
            names += [self.cycle.name, self.cycle.args["using"].name]
        return names

    def mark_values(self) -> tuple[exp.Expr, exp.Expr]:
        """(v, d): the mark of a row that closes a cycle, and of the others."""
        assert self.cycle is not None
        to, default = self.cycle.args.get("to"), self.cycle.args.get("default")
        if to is None or default is None:
            return exp.true(), exp.false()
        return to, default


def has_search_cycle(query: exp.Expr) -> bool:
    return any(c.args.get("search") or c.args.get("cycle") for c in query.find_all(exp.CTE))


def rewrite_search_cycle(query: exp.Query, sql: str, columns_of: ColumnsOf) -> exp.Query:
    """`query` with every CTE's SEARCH and CYCLE clauses rewritten into the CTE's body."""
    if not has_search_cycle(query):
        return query
    query = query.copy()
    if not isinstance(query.args.get("with_"), exp.With):
        raise RecSQLAnalysisError(
            "SEARCH and CYCLE clauses are supported on the WITH of the statement itself and in "
            "the CTEs it defines; move the WITH to the top of the statement",
            condition="RECSQL_SEARCH_CYCLE_UNSUPPORTED", sql=sql,
            **locate(_first_clause(query), sql),
        )
    for cte in list(query.find_all(exp.CTE)):
        if cte.args.get("search") or cte.args.get("cycle"):
            _rewrite(_check(cte, sql, columns_of), sql)
    return query


def _first_clause(query: exp.Expr) -> exp.Expr | None:
    return next((c.args.get("search") or c.args.get("cycle") for c in query.find_all(exp.CTE)
                 if c.args.get("search") or c.args.get("cycle")), None)


def _error(message: str, node: exp.Expr | None, sql: str) -> RecSQLAnalysisError:
    return RecSQLAnalysisError(message, condition="RECSQL_SEARCH_CYCLE", sql=sql, **locate(node, sql))


def _check(cte: exp.CTE, sql: str, columns_of: ColumnsOf) -> _Clauses:
    """PostgreSQL's checks of the clauses (parse_cte.c), in its order and with its words."""
    search, cycle = cte.args.get("search"), cte.args.get("cycle")
    clause = search or cycle
    alias = cte.args.get("alias")
    if alias is not None and any(isinstance(c, AggregateColumn) for c in alias.columns or []):
        raise _error(f"CTE `{cte.alias}` has head aggregates: SEARCH and CYCLE need a plain "
                     "UNION [ALL] recursion (drop the clause or the aggregates)", clause, sql)
    columns = columns_of(cte)
    known = {c.lower() for c in columns}
    if search:
        _check_columns("search column", search.expressions, known, sql)
        if search.name.lower() in known:
            raise _error(f'search sequence column name "{search.name}" already used in WITH '
                         "query column list", search.this, sql)
    if cycle:
        _check_columns("cycle column", cycle.expressions, known, sql)
        mark, path = cycle.this, cycle.args["using"]
        if mark.name.lower() in known:
            raise _error(f'cycle mark column name "{mark.name}" already used in WITH query '
                         "column list", mark, sql)
        if path.name.lower() in known:
            raise _error(f'cycle path column name "{path.name}" already used in WITH query '
                         "column list", path, sql)
        if mark.name.lower() == path.name.lower():
            raise _error("cycle mark column name and cycle path column name are the same", path, sql)
        _check_mark_values(cycle, sql)
    if search and cycle:
        for name, what in ((cycle.this, "cycle mark"), (cycle.args["using"], "cycle path")):
            if search.name.lower() == name.name.lower():
                raise _error(f"search sequence column name and {what} column name are the same",
                             name, sql)
    return _Clauses(cte, columns, search, cycle)


def _check_columns(what: str, names: list[exp.Identifier], known: set[str], sql: str) -> None:
    seen: set[str] = set()
    for name in names:
        key = name.name.lower()
        if key not in known:
            raise _error(f'{what} "{name.name}" not in WITH query column list', name, sql)
        if key in seen:
            raise _error(f'{what} "{name.name}" specified more than once', name, sql)
        seen.add(key)


def _literal_type(value: exp.Expr) -> str | None:
    if isinstance(value, exp.Boolean):
        return "boolean"
    if isinstance(value, exp.Literal):
        if value.is_string:
            return "string"
        return "integer" if value.name.isdigit() else "numeric"
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        return _literal_type(value.this)
    return None  # an expression: Spark types it, and reports a mismatch itself


def _check_mark_values(cycle: CycleClause, sql: str) -> None:
    to, default = cycle.args.get("to"), cycle.args.get("default")
    if to is None or default is None:
        return
    types = _literal_type(to), _literal_type(default)
    if None not in types and types[0] != types[1]:
        raise _error(f"CYCLE types {types[0]} and {types[1]} cannot be matched: the TO and "
                     "DEFAULT values of the mark must have one type", default, sql)


def _rewrite(clauses: _Clauses, sql: str) -> None:
    cte = clauses.cte
    anchor, recursive = _terms(cte, sql)
    reference = _reference(cte, recursive, sql)
    distinct = bool(cte.this.args.get("distinct"))
    new_anchor = _anchor(clauses, anchor)
    new_recursive = _recursive(clauses, recursive, reference)
    cte.set("this", exp.union(new_anchor, new_recursive, distinct=distinct))
    alias = cte.args.get("alias") or exp.TableAlias(this=exp.to_identifier(cte.alias))
    alias.set("columns", [exp.to_identifier(n) for n in clauses.columns + clauses.added])
    cte.set("alias", alias)
    cte.set("search", None)
    cte.set("cycle", None)
    cte.meta[COMPARED] = [(name.name, clause, locate(name, sql))
                          for clause, given in (("SEARCH", clauses.search), ("CYCLE", clauses.cycle)) if given
                          for name in given.expressions]


def _unwrap(query: exp.Expr) -> exp.Expr:
    while isinstance(query, exp.Subquery) and not query.alias:
        query = query.this
    return query


def _terms(cte: exp.CTE, sql: str) -> tuple[exp.Expr, exp.Select]:
    """(anchor, recursive term) of `anchor UNION [ALL] recursive`, as PostgreSQL requires."""
    body = cte.this
    clause = cte.args.get("search") or cte.args.get("cycle")
    if not isinstance(body, exp.Union) or any(body.args.get(k) for k in ("order", "limit", "offset")):
        raise _error(f'WITH query "{cte.alias}" must be a UNION [ALL] of an anchor and a recursive '
                     "term to have a SEARCH or CYCLE clause", clause, sql)
    left, right = _unwrap(body.this), _unwrap(body.expression)
    if not isinstance(left, (exp.Select, exp.Values)) or left.args.get("with_"):
        raise _error("with a SEARCH or CYCLE clause, the left side of the UNION must be a SELECT",
                     left, sql)
    if not isinstance(right, exp.Select):
        raise _error("with a SEARCH or CYCLE clause, the right side of the UNION must be a SELECT",
                     right, sql)
    return left, right


def _reference(cte: exp.CTE, recursive: exp.Select, sql: str) -> exp.Table:
    """The recursive term's one reference to the CTE, a source of its own FROM/JOIN."""
    name = cte.alias.lower()
    tables = [t for t in recursive.find_all(exp.Table)
              if isinstance(t.this, exp.Identifier) and not t.args.get("db") and t.name.lower() == name]
    clause = cte.args.get("search") or cte.args.get("cycle")
    if not tables:
        raise _error(f'WITH query "{cte.alias}" is not recursive: a SEARCH or CYCLE clause needs '
                     "a recursive term that reads it", clause, sql)
    top = [t for t in tables if any(t is s for s in sources(recursive))]
    if len(tables) > 1 or not top:
        raise _error(f'with a SEARCH or CYCLE clause, the recursive reference to WITH query '
                     f'"{cte.alias}" must be at the top level of its right-hand SELECT', tables[-1], sql)
    return top[0]




def _column(name: str) -> exp.Column:
    return exp.column(name, table=WRAPPER, quoted=True)


def _struct(names: list[str], first: tuple[str, exp.Expr] | None = None) -> exp.Struct:
    fields = [exp.alias_(_column(n), n, quoted=True) for n in names]
    if first is not None:
        fields.insert(0, exp.alias_(first[1], first[0], quoted=True))
    return exp.Struct(expressions=fields)


def _wrapped(query: exp.Expr, names: list[str]) -> exp.Subquery:
    return exp.Subquery(
        this=query,
        alias=exp.TableAlias(this=exp.to_identifier(WRAPPER),
                             columns=[exp.to_identifier(n, quoted=True) for n in names]),
    )


def _anchor(clauses: _Clauses, anchor: exp.Expr) -> exp.Select:
    extras: list[exp.Expr] = []
    search, cycle = clauses.search, clauses.cycle
    if search:
        keys = [c.name for c in search.expressions]
        if search.args["kind"] == "BREADTH":
            depth = exp.cast(exp.Literal.number(0), exp.DataType.build("BIGINT"))
            seq: exp.Expr = _struct(keys, (DEPTH_FIELD, depth))
        else:
            seq = exp.Array(expressions=[_struct(keys)])
        extras.append(exp.alias_(seq, search.name, quoted=True))
    if cycle:
        keys = [c.name for c in cycle.expressions]
        extras.append(exp.alias_(clauses.mark_values()[1].copy(), cycle.name, quoted=True))
        extras.append(exp.alias_(exp.Array(expressions=[_struct(keys)]),
                                 cycle.args["using"].name, quoted=True))
    return exp.select(*[_column(n) for n in clauses.columns], *extras).from_(
        _wrapped(anchor, clauses.columns))


def _recursive(clauses: _Clauses, recursive: exp.Select, reference: exp.Table) -> exp.Select:
    inner = recursive.copy()
    ref = next(t for t in sources(inner) if t.name.lower() == reference.name.lower())
    _expand_reference_stars(inner, ref.alias_or_name, clauses.columns)
    for name in clauses.added:
        inner.select(exp.column(name, table=ref.alias_or_name, quoted=True), copy=False)
    search, cycle = clauses.search, clauses.cycle
    extras: list[exp.Expr] = []
    if search:
        keys = [c.name for c in search.expressions]
        seq_column = _column(search.name)
        if search.args["kind"] == "BREADTH":
            depth = exp.Dot(this=seq_column, expression=exp.to_identifier(DEPTH_FIELD, quoted=True))
            seq: exp.Expr = _struct(keys, (DEPTH_FIELD, exp.Add(this=depth, expression=exp.Literal.number(1))))
        else:
            seq = exp.ArrayConcat(this=seq_column, expressions=[exp.Array(expressions=[_struct(keys)])])
        extras.append(exp.alias_(seq, search.name, quoted=True))
    where = None
    if cycle:
        keys = [c.name for c in cycle.expressions]
        path = _column(cycle.args["using"].name)
        marked, default = clauses.mark_values()
        seen = exp.ArrayContains(this=path, expression=_struct(keys))
        mark = exp.Case(ifs=[exp.If(this=seen, true=marked.copy())], default=default.copy())
        extras.append(exp.alias_(mark, cycle.name, quoted=True))
        extras.append(exp.alias_(
            exp.ArrayConcat(this=path.copy(), expressions=[exp.Array(expressions=[_struct(keys)])]),
            cycle.args["using"].name, quoted=True))
        where = exp.NEQ(this=_column(cycle.name), expression=marked.copy())
    select = exp.select(*[_column(n) for n in clauses.columns], *extras).from_(
        _wrapped(inner, clauses.columns + clauses.added))
    return select.where(where) if where is not None else select


def _expand_reference_stars(select: exp.Select, ref_alias: str, columns: list[str]) -> None:
    """`*` and `ref.*` in the recursive term read the CTE's own columns only, not the ones the
    clauses add (PostgreSQL expands them the same way)."""
    ref_columns = [exp.column(n, table=ref_alias, quoted=True) for n in columns]
    expanded: list[exp.Expr] = []
    for item in select.expressions:
        if isinstance(item, exp.Star):
            for source in sources(select):
                name = source.alias_or_name
                if name.lower() == ref_alias.lower():
                    expanded += [c.copy() for c in ref_columns]
                else:
                    expanded.append(exp.Column(this=exp.Star(), table=exp.to_identifier(name)))
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star) \
                and item.table.lower() == ref_alias.lower():
            expanded += [c.copy() for c in ref_columns]
        else:
            expanded.append(item)
    select.set("expressions", expanded)
