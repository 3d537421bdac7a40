"""The rules of docs/dialect.md section 3, each a small function raising `RecSQLAnalysisError`."""

from __future__ import annotations

import difflib
import re

from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.parser.dialect import AggregateColumn
from recsql.parser.locate import locate, locate_name, locate_span
from recsql.planner.names import TableName, is_cte_reference

# Constructs a recursive branch may not contain, with the reason given to the user. Under UNION
# an aggregate with GROUP BY is read as the head aggregate before planning (planner/spelling.py),
# and under UNION ALL each step aggregates the previous step's rows, so the first two rows are
# a safety net: they name the spelling tools parse.
AGGREGATE_SPELLING = (
    "under UNION make the aggregate a whole output column and GROUP BY the other output columns "
    "(`SELECT e.Dst, MIN(p.Cost + e.Cost) ... GROUP BY e.Dst`), or put it in the CTE head "
    "(`min() AS Cost`)"
)
FORBIDDEN_IN_RECURSIVE_BRANCH = (
    (exp.AggFunc, "aggregation", AGGREGATE_SPELLING),
    (exp.Group, "GROUP BY", AGGREGATE_SPELLING),
    (exp.Window, "a window function", "compute it in the final query, outside the recursion"),
    (exp.Limit, "LIMIT", "limit the final query instead"),
)
# Allowed in a UNION ALL term: each step aggregates the previous step's rows, as in DuckDB.
PER_STEP = (exp.AggFunc, exp.Group)
# Clauses the dialect parses that recsql does not implement, with the words that start them in
# the text (where the error points) and the fix: refused, never silently dropped. PostgreSQL
# refuses FOR UPDATE in a recursive query too ("FOR UPDATE/SHARE in a recursive query is not
# implemented"); Spark has no locking reads.
UNIMPLEMENTED = (
    (exp.Lock, "a locking read (FOR UPDATE / FOR SHARE)", r"\bFOR\s+(NO\s+KEY\s+|KEY\s+)?(UPDATE|SHARE)\b",
     "recsql and Spark read tables without locking rows; remove the clause"),
)


def check_branch_columns(cte, index: int, body: exp.Query, sql: str, name: exp.Expr | None = None) -> None:
    """`name`: where the CTE's name is written, to point at when the branch has nothing to
    point at (`SELECT UNION ...`)."""
    selects = body.selects
    if any(isinstance(s, exp.Star) or (isinstance(s, exp.Column) and s.is_star) for s in selects):
        return  # Spark expands `*`; the executor checks the analysed width
    if len(selects) != len(cte.head):
        head = ", ".join(c.render() for c in cte.head)
        got = ", ".join(s.sql("rasql") for s in selects)
        raise RecSQLAnalysisError(
            f"Branch {index} of CTE `{cte.name}` yields {len(selects)} column(s) ({got}) but the "
            f"head `{cte.name}({head})` has {len(cte.head)}; make them agree",
            condition="RECSQL_HEAD_BRANCH_MISMATCH",
            **(locate(body, sql) or locate(name, sql)),
        )


def check_unimplemented(query: exp.Expr, sql: str) -> None:
    """Refuse a clause of `query` (a statement recsql plans) that recsql does not implement."""
    for kind, what, words, fix in UNIMPLEMENTED:
        node = query.find(kind)
        if node is None:
            continue
        at = locate_span(node.parent, sql) if node.parent is not None else {}
        found = re.search(words, sql[_offset(sql, at):], re.IGNORECASE) if at else None
        if found:
            start = _offset(sql, at) + found.start()
            at = {"line": sql.count("\n", 0, start) + 1,
                  "pos": start - (sql.rfind("\n", 0, start) + 1), "length": len(found.group(0))}
        raise RecSQLAnalysisError(
            f"{what[0].upper()}{what[1:]} in a recursive query is not implemented: {fix}",
            condition="RECSQL_UNSUPPORTED_CLAUSE", **at)


def _offset(sql: str, at: dict) -> int:
    """The offset in `sql` of a `locate` position."""
    lines = sql.split("\n")
    return sum(len(line) + 1 for line in lines[: at["line"] - 1]) + at["pos"]


def check_steps_end(group, sql: str) -> None:
    """Refuse a UNION ALL recursion that can never end: a recursive term that aggregates its own
    CTE's previous step with no GROUP BY or HAVING (`SELECT count(*) FROM x`) yields one row
    every step, whatever the rows, so its delta is never empty. Spark and PostgreSQL refuse an
    aggregate over the recursive reference at once; recsql allows one that may end (each step
    aggregates the previous step's rows, as in DuckDB), and a final LIMIT ends the recursion."""
    if group.row_target is not None:
        return
    for cte in group.ctes:
        for branch in cte.recursive_branches if cte.bag else []:
            select = branch.select
            if not isinstance(select, exp.Select) or select.args.get("group") \
                    or select.args.get("having") or any(r.cte != cte.key for r in branch.refs):
                continue
            aggregate = next((a for a in _own_nodes(select, exp.AggFunc)
                              if not isinstance(a.parent, exp.Window)), None)
            if aggregate is None:
                continue
            raise RecSQLAnalysisError(
                f"Recursive branch {branch.index} of CTE `{cte.name}` aggregates the previous "
                "step's rows with no GROUP BY or HAVING, so under UNION ALL every step yields "
                "one row again and the recursion never ends (Spark and PostgreSQL refuse an "
                "aggregate over the recursive reference). Give it a HAVING that stops it, "
                f"filter its result (`SELECT c FROM (SELECT count(*) AS c FROM {cte.name}) "
                "WHERE c < 10`), or read the CTE with a LIMIT",
                condition="RECSQL_RECURSION_NEVER_ENDS", **locate(aggregate, sql))


def check_recursive_branch(cte, branch, group_defs: dict, sql: str,
                           head_names: dict[str, list[str]]) -> None:
    """`head_names`: each group CTE's column names, as the planner inferred them."""
    _check_forbidden(cte, branch, sql)
    _check_negation(cte, branch, sql)
    _check_subquery_refs(cte, branch, sql)
    _check_ref_columns(cte, branch, head_names, sql)
    _check_aggregate_keys(cte, branch, group_defs, sql)


def _check_ref_columns(cte, branch, head_names: dict[str, list[str]], sql: str) -> None:
    """`path.Cst` where `path` is a recursive reference: name the head's columns (rule 4)."""
    heads = {r.alias.lower(): (r, head_names[r.cte]) for r in branch.refs}
    for column in branch.select.find_all(exp.Column):
        table = column.table.lower()
        if table in heads and column.name.lower() not in {n.lower() for n in heads[table][1]}:
            ref, names = heads[table]
            raise RecSQLAnalysisError(
                f"Column `{column.name}` of `{ref.alias}` cannot be resolved in recursive branch "
                f"{branch.index} of `{cte.name}`{did_you_mean(column.name, names)} "
                f"(the head declares {', '.join(names)})",
                condition="RECSQL_UNKNOWN_COLUMN",
                **locate(column, sql),
            )


def check_group(step, sql: str) -> None:
    if not any(cte.base_branches for cte in step.ctes):
        names = ", ".join(f"`{n}`" for n in step.names)
        raise RecSQLAnalysisError(
            f"Recursive CTE {names} has no base branch: every branch reads the CTE itself, so "
            "the recursion has nothing to start from; add a branch that does not reference it",
            condition="RECSQL_NO_BASE_BRANCH",
            **locate(step.ctes[0].branches[0].select, sql),
        )


def _own_nodes(select: exp.Expr, kind):
    """Nodes of `kind` in `select` itself, not inside nested subqueries."""
    for node in select.find_all(kind):
        parent = node.parent
        nested = False
        while parent is not None and parent is not select:
            if isinstance(parent, (exp.Subquery, exp.Exists)) or (
                isinstance(parent, exp.Select) and parent is not select
            ):
                nested = True
                break
            parent = parent.parent
        if not nested:
            yield node


def _check_forbidden(cte, branch, sql: str) -> None:
    for kind, what, fix in FORBIDDEN_IN_RECURSIVE_BRANCH:
        if cte.bag and kind in PER_STEP:
            continue
        for node in _own_nodes(branch.select, kind):
            if isinstance(node.parent, exp.Window) and kind is exp.AggFunc:
                continue  # `MIN(x) OVER (...)`: reported as a window function
            raise RecSQLAnalysisError(
                f"Recursive branch {branch.index} of CTE `{cte.name}` uses {what}, which is not "
                f"allowed inside the recursion: {fix}",
                condition="RECSQL_FORBIDDEN_IN_RECURSION",
                **locate(node, sql),
            )


def _check_subquery_refs(cte, branch, sql: str) -> None:
    """The recursive group read inside a scalar, IN or EXISTS subquery (`WHERE (SELECT SUM(x)
    FROM r) < 10`) would aggregate or test a relation still being built: refused, as Spark does.
    A derived table in FROM (`FROM (SELECT * FROM r) AS s`) is an ordinary reference.

    One form is read as Spark reads it (docs/dialect.md section 1): under UNION ALL, a term with
    no FROM whose select list holds scalar subqueries that only filter and project a recursive
    reference (`SELECT (SELECT n + 1 FROM t WHERE n < 5)`). The reference is bound to the
    previous step's rows like any other, so each step is one row computed by Spark's own scalar
    subquery over them: NULL when it finds no row, Spark's error when it finds more than one."""
    bindings = {r.binding for r in branch.refs}
    one_row_term = cte.bag and isinstance(branch.select, exp.Select) and not branch.select.args.get("from_")
    for sub in branch.select.find_all(exp.Subquery, exp.Exists):
        if isinstance(sub.parent, (exp.From, exp.Join)):
            continue
        if not _reads(sub, bindings):
            continue
        if one_row_term and _scalar_read(sub, branch.select, bindings):
            continue
        raise RecSQLAnalysisError(
            f"Recursive branch {branch.index} of CTE `{cte.name}` reads its own recursive "
            "group inside a subquery; read it in the FROM clause (join it) instead",
            condition="RECSQL_RECURSIVE_REFERENCE_IN_SUBQUERY",
            **locate(sub, sql),
        )


def _reads(node: exp.Expr, bindings: set[str]) -> bool:
    return any(isinstance(t.this, exp.Placeholder) and t.this.name in bindings
               for t in node.find_all(exp.Table))


def _scalar_read(sub: exp.Expr, term: exp.Select, bindings: set[str]) -> bool:
    """`sub` is a scalar subquery in `term`'s select list of the form `(SELECT e FROM r [WHERE
    p])`, `r` a recursive reference: no join, aggregation, grouping, window, ORDER BY, LIMIT,
    DISTINCT or nested subquery (Spark refuses a recursive reference under an aggregate or a
    sort; the rest is kept out until checked against Spark)."""
    if not isinstance(sub, exp.Subquery) or sub.alias or isinstance(sub.parent, exp.In):
        return False
    node: exp.Expr | None = sub
    while node is not None and node.parent is not term:  # up to the select-list item holding it
        node = node.parent
    if node is None or node.arg_key != "expressions":
        return False
    inner = sub.this
    if not isinstance(inner, exp.Select):
        return False
    source = inner.args.get("from_")
    table = source.this if isinstance(source, exp.From) else None
    if not (isinstance(table, exp.Table) and isinstance(table.this, exp.Placeholder)
            and table.this.name in bindings):
        return False
    extras = ("joins", "group", "having", "order", "limit", "offset", "distinct", "qualify",
              "windows", "with_", "laterals", "pivots")
    if any(inner.args.get(arg) for arg in extras):
        return False
    return not inner.find(exp.AggFunc, exp.Window, exp.Subquery, exp.Exists)


def _check_negation(cte, branch, sql: str) -> None:
    """Negation over the CTE's own recursive group is not monotone (docs/dialect.md section 3, rule 2)."""
    bindings = {r.binding for r in branch.refs}

    def reads_group(node: exp.Expr) -> bool:
        return any(
            isinstance(t.this, exp.Placeholder) and t.this.name in bindings
            for t in node.find_all(exp.Table)
        )

    negations = [n.this for n in branch.select.find_all(exp.Not)]
    if not cte.bag:
        # under UNION ALL a step reads only the previous step's rows, which are fixed while it
        # runs, so an EXCEPT over them is evaluated as Spark does (no fixpoint to lose)
        negations += list(branch.select.find_all(exp.Except))
    negations += [
        j for j in branch.select.find_all(exp.Join) if (j.args.get("kind") or "").upper() == "ANTI"
    ]
    for node in negations:
        if node is not None and reads_group(node):
            raise RecSQLAnalysisError(
                f"Recursive branch {branch.index} of CTE `{cte.name}` negates its own recursive "
                "group (NOT EXISTS / NOT IN / EXCEPT / ANTI JOIN), which is not monotone; negate "
                "only CTEs completed in an earlier stratum",
                condition="RECSQL_NONMONOTONE_NEGATION",
                **locate(node, sql),
            )


def equi_joins(select: exp.Expr) -> list[tuple[exp.Column, exp.Column]]:
    """`a.x = b.y` conjuncts of the WHERE clause and JOIN ... ON conditions."""
    conditions = []
    where = select.args.get("where")
    if where is not None:
        conditions.append(where.this)
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None:
            conditions.append(join.args["on"])
    pairs = []
    for condition in conditions:
        for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
            if (
                isinstance(conjunct, exp.EQ)
                and isinstance(conjunct.this, exp.Column)
                and isinstance(conjunct.expression, exp.Column)
            ):
                pairs.append((conjunct.this, conjunct.expression))
    return pairs


def _check_aggregate_keys(cte, branch, group_defs: dict, sql: str) -> None:
    """An aggregated column is never an equi-join key or a group key in its own group (rule 1)."""
    aggregated = _aggregated_columns(branch, group_defs)
    rule = (
        "an aggregated column is never a join, grouping or partition key inside its own "
        "recursive group (docs/dialect.md section 3, rule 1): rows are placed by their group key, so "
        "join on a group-key column instead"
    )
    for left, right in equi_joins(branch.select):
        for side in (left, right):
            owner = _aggregated_in(side, aggregated)
            if owner is not None:
                raise RecSQLAnalysisError(
                    f"`{side.sql('rasql')}` is an aggregated or payload column of `{owner}` "
                    f"used as an equi-join key in recursive branch {branch.index} of `{cte.name}`: {rule}",
                    condition="RECSQL_AGGREGATE_AS_KEY",
                    **locate(side, sql),
                )
    for item, head in zip(branch.select.selects, cte.head):
        if not head.is_key:
            continue
        for column in item.find_all(exp.Column):
            owner = _aggregated_in(column, aggregated)
            if owner is not None:
                raise RecSQLAnalysisError(
                    f"`{column.sql('rasql')}` is an aggregated or payload column of `{owner}` "
                    f"feeding group-key column `{head.name}` of `{cte.name}` in "
                    f"recursive branch {branch.index}: {rule}",
                    condition="RECSQL_AGGREGATE_AS_KEY",
                    **locate(column, sql),
                )


def _aggregated_columns(branch, group_defs: dict) -> dict[str, tuple[set[str], str]]:
    """alias -> (aggregated column names, CTE name) for the branch's recursive references."""

    result = {}
    for ref in branch.refs:
        d = group_defs[ref.cte]
        names = {c.name.lower() for c in d.column_list or [] if isinstance(c, AggregateColumn)}
        result[ref.alias.lower()] = (names, d.name)
    return result


def _aggregated_in(column: exp.Column, aggregated: dict) -> str | None:
    """The CTE whose aggregated column `column` is, if it is one: by its qualifier, or for an
    unqualified name (`WHERE Cost = edge.Src`) the first reference that has it."""
    table = column.table.lower()
    if table:
        names, cte = aggregated.get(table, (set(), None))
        return cte if column.name.lower() in names else None
    return next((cte for names, cte in aggregated.values() if column.name.lower() in names), None)


def check_tables(node: exp.Expr, sql: str, catalog, known_ctes: set[str]) -> None:
    """Every catalog table the query reads exists, resolved by its whole name as Spark resolves
    it (`analytics.edges` in schema `analytics`), else Spark's error (rule 4). A CTE of a WITH
    nested in the final query (dbt's tests wrap theirs in a subquery) is a name too."""
    known_ctes = set(known_ctes) | {cte.alias.lower() for cte in node.find_all(exp.CTE)}
    for table in node.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or is_cte_reference(table, known_ctes):
            continue
        if catalog.columns(TableName.of(table)) is None:
            raise table_not_found(table, sql, catalog, known_ctes)


def table_not_found(table: exp.Table, sql: str, catalog, known_ctes=()) -> RecSQLAnalysisError:
    """Spark's TABLE_OR_VIEW_NOT_FOUND for `table`, named as written, with the nearest names of
    its schema (and the statement's CTEs, for an unqualified name)."""
    name = TableName.of(table)
    namespace = name.parts[:-1]
    known = {TableName((*namespace, t)) for t in catalog.tables(namespace)}
    if not namespace:
        known |= {TableName((c,)) for c in known_ctes}
    by_text = {str(k).lower(): k for k in known}
    close = difflib.get_close_matches(str(name).lower(), sorted(by_text), n=3, cutoff=0.5)
    suggestion = f"Did you mean {', '.join(by_text[c].sql for c in close)}?" if close else ""
    error = RecSQLAnalysisError(
        f"The table or view {name.sql} cannot be found.{' ' + suggestion if suggestion else ''} "
        "Verify the spelling and correctness of the schema and catalog.",
        condition="TABLE_OR_VIEW_NOT_FOUND",
        **locate_name(table, sql),
    )
    error.sqlstate = "42P01"  # Spark's, for clients that read it (the server, JDBC)
    return error


def did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name.lower(), [c.lower() for c in candidates], n=3, cutoff=0.5)
    lookup = {c.lower(): c for c in candidates}
    if not close:
        return ""
    return ". Did you mean " + ", ".join(f"`{lookup[c]}`" for c in close) + "?"
