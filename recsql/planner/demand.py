"""Demand-driven evaluation: the final query's filter on a recursive CTE pushed into its anchors.

`WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION SELECT tc.X, edge.Dst FROM tc,
edge WHERE tc.Y = edge.Src) SELECT * FROM tc WHERE X = 9` computes only the rows whose X is 9:
every recursive branch carries X unchanged from its one reference to tc, so each row's X is the X
of the anchor row it derives from, and filtering the anchors on X filters the fixpoint the same
way. This holds for set and bag recursion, and for head aggregates grouped by a key that holds X
(every contributor to a group has the group's X). The final query keeps its own filter, so a
push only ever removes rows that filter would remove.

Pushed: conjuncts of the final SELECT's WHERE that read one column of a CTE the final query reads
directly (in its FROM or a join), compared with constants by `=`, `IN`, `<`, `<=`, `>`, `>=` or
BETWEEN. The CTE is recursive, or a plain projection of one (a stored view's expansion), and
nothing but the final query's FROMs and joins reads it (nothing but the projection reads the
recursion under one). A final UNION, INTERSECT or EXCEPT is read branch by branch (each branch's
rows stay the same, so their combination does).

A CTE read several times by the final query (a self-join, or several branches of its UNION)
has its reads grouped by a column each read of the group filters (the column most reads filter
first). A group gets, per column all its reads filter, the OR of their filters: the recursion
holds the rows some read keeps, and each read keeps its own filter, so it sees the rows it saw
without the push. The largest group keeps the recursion as written; each other group reads its
own copy of it (the CTE and the recursion under it, under fresh names `tc__demand1`, ...), so
`closure a JOIN closure b ... WHERE a.node = 1 AND b.reached = 7` runs one recursion forwards
from 1 and one backwards from 7. If some read has no filter that can be pushed, it needs the
whole recursion, which holds every other read's rows too: then nothing is pushed for that CTE.
Each copy is a fixpoint of its own, so filters that keep most rows at both ends can compute more
than the one whole recursion would; a point or a few values at each end (the common case) is far
less.

Not pushed, with the reason (for EXPLAIN): an aggregated column, a column some recursive branch
computes, mutual or non-linear recursion, a recursion level limit, a CTE read more than once
where some read is not filtered (it needs the whole recursion) or is not in the final query's
FROM, an anchor whose column cannot be filtered before its SELECT's own work (aggregates,
windows, LIMIT, `*`).

A column bound at the other end (`tc` filtered on Y) is evaluated backwards: see
`_reversed_closure`.

A leaf but for branches' and scoping's helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from recsql.parser.dialect import AggregateColumn
from recsql.planner.branches import branches_of, has_modifiers, sources
from recsql.planner.doubling import has_clauses, single_equality
from recsql.planner.names import is_cte_reference
from recsql.planner.scoping import rename_reads
from recsql.planner.search_cycle import WRAPPER

CONSTANT_NODES = (exp.Literal, exp.Placeholder, exp.Neg, exp.Paren, exp.Cast, exp.DataType,
                  exp.Boolean, exp.Null, exp.Identifier, exp.Var)
# what an anchor's column may be to be filtered in its WHERE (no aggregates, windows, generators
# or non-deterministic functions: the filter must see the value the SELECT outputs)
FILTERABLE_NODES = CONSTANT_NODES + (exp.Column, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod,
                                     exp.Concat, exp.DPipe, exp.Alias)
MARK = "__recsql_demand__"
COPY_OF = "demand_copy_of"  # a copy of the recursion for some reads: the CTE it copies, in its meta


@dataclass
class Demand:
    """The statement after pushing, and what was pushed or refused (EXPLAIN's `demand:` lines)."""

    query: exp.Query
    notes: list[str] = field(default_factory=list)


class _NotPushed(Exception):
    pass


class _NoRecursion(_NotPushed):
    """The filtered CTE reads no recursion: nothing to say in EXPLAIN."""


def push_demand(query: exp.Query) -> Demand:
    """`query` with the final query's filters on recursive CTEs pushed into their anchors."""
    with_ = query.args.get("with_")
    if not isinstance(with_, exp.With) or not any(
            leaf.args.get("where") is not None for leaf in _leaves(query) or []):
        return Demand(query)
    query = query.copy()
    notes: list[str] = []
    for key in list(_final_reads(query)):
        query = _push_reads(query, key, notes)
    return Demand(query, notes)


def _final_reads(query: exp.Query) -> dict[str, list[tuple[exp.Select, exp.Table]]]:
    """The CTEs the final query reads in its FROMs and joins (by lower-case name), with each
    read's SELECT and table, in the order written."""
    ctes = _ctes(query)
    reads: dict[str, list[tuple[exp.Select, exp.Table]]] = {}
    for leaf in _leaves(query) or []:
        for table in sources(leaf):
            if isinstance(table, exp.Table) and is_cte_reference(table, ctes):
                reads.setdefault(table.name.lower(), []).append((leaf, table))
    return reads


def _push_reads(query: exp.Query, key: str, notes: list[str]) -> exp.Query:
    """`query` with the filters of the final query's reads of CTE `key` pushed into the recursion
    under it, EXPLAIN's lines added to `notes`. Reads grouped by a column they all filter share
    the recursion (the OR of their filters); each further group gets its own copy of it. If some
    group has no filter that can be pushed, the statement stays as it was."""
    trial = query.copy()
    tables = _final_reads(trial)[key]
    filters = [_filters(leaf, table) for leaf, table in tables]
    name = tables[0][1].name
    if not any(filters) or not _recursive(_ctes(trial), key):
        return query
    if not all(filters):
        # A read without a filter needs the whole recursion, which holds every other read's rows
        # too: a copy of the recursion per filtered read would only add fixpoints (each its own
        # Spark jobs per iteration) to the one computed anyway, so no read gets one.
        shown = " AND ".join(_show_all(*f) for f in next(f for f in filters if f).values())
        notes.append(f"demand: not pushed {shown} into {name}: {name} is read {len(tables)} times "
                     "and not every read is filtered (an unfiltered read needs the whole recursion)")
        return query
    groups = _groups(filters)
    written = [table.alias if table.alias.lower() != name.lower() else "" for _, table in tables]
    # the largest group keeps the recursion as written, the others read copies of it
    targets = [key] + [_copy_chain(trial, key, [tables[i][1] for i in group]) for group in groups[1:]]
    ctes = _ctes(trial)
    outcomes: list[tuple[int, str, str | None, str]] = []  # group, filter, pushed into, why not
    for number, (group, target) in enumerate(zip(groups, targets)):
        for column, templates, shown in _either([filters[i] for i in group]):
            try:
                outcomes.append((number, shown, _push(trial, ctes, target, column, templates,
                                                      len(group)), ""))
            except _NoRecursion:
                pass
            except _NotPushed as reason:
                outcomes.append((number, shown, None, str(reason)))
    failed = {n for n in range(len(groups)) if not any(o[0] == n and o[2] for o in outcomes)}
    if failed and len(groups) > 1:
        # a read with no filter pushed needs the whole recursion: as for an unfiltered read, the
        # statement stays as written and no copy is run
        targets = [key] * len(groups)
        outcomes = sorted([o for o in outcomes if o[2] is None] + [
            (n, _show_group(filters, group), None, f"another read of {name} has no filter that can "
             "be pushed, so it needs the whole recursion")
            for n, group in enumerate(groups) if n not in failed], key=lambda o: o[0])
    for number, shown, into, why in outcomes:
        group = groups[number]
        which = _which(name, written, group, targets[number]) if len(groups) > 1 else ""
        if into is None:
            notes.append(f"demand: not pushed {shown} into {name}{which}: {why}")
        else:
            reached = f" (for its {len(group)} reads)" if len(groups) == 1 and len(group) > 1 else ""
            notes.append(f"demand: pushed {shown} into the base branches of {into}{reached}{which}")
    return query if failed and len(groups) > 1 else trial


def _groups(filters: list[Filters]) -> list[list[int]]:
    """The reads (their indexes) grouped by a column every read of the group filters, the column
    filtered by the most reads first (ties: the first written), until every read has a group."""
    left = list(range(len(filters)))
    groups = []
    while left:
        columns = [column for i in left for column in filters[i]]
        best = max(columns, key=columns.count)
        groups.append([i for i in left if best in filters[i]])
        left = [i for i in left if best not in filters[i]]
    return groups


def _which(name: str, written: list[str], group: list[int], target: str) -> str:
    """For EXPLAIN: which reads of CTE `name` (numbered as written, with their aliases) a push is
    for, and the copy of the recursion they read, if any."""
    reads = ", ".join(str(i + 1) + (f" ({written[i]})" if written[i] else "") for i in group)
    whose = "its" if len(group) == 1 else "their"
    copy = f", on {whose} own copy {target}" if target != name.lower() else ""
    return f" (for {name}'s read{'s' if len(group) > 1 else ''} {reads} of {len(written)}{copy})"


def _show_group(filters: list[Filters], group: list[int]) -> str:
    return " AND ".join(shown for _, _, shown in _either([filters[i] for i in group]))


def _copy_chain(query: exp.Query, key: str, reads: list[exp.Table]) -> str:
    """Copy CTE `key` and the recursion under it (each CTE it reads that is or reads a recursion;
    plain CTEs are shared) under fresh names at the end of the WITH, and point `reads` at the
    copy of `key`; its name, lower-case."""
    ctes = _ctes(query)
    chain = _chain(ctes, key)
    used = set(ctes) | {c.alias.lower() for c in query.find_all(exp.CTE)} \
        | {t.name.lower() for t in query.find_all(exp.Table)}
    number = 1
    while any(f"{k}__demand{number}" in used for k in chain):
        number += 1
    names = {k: f"{ctes[k].alias}__demand{number}" for k in chain}
    copies = []
    for cte in query.args["with_"].expressions:
        if cte.alias.lower() in chain:
            copy = cte.copy()
            for old, new in names.items():
                rename_reads(copy.this, old, new)
            copy.args["alias"].set("this", exp.to_identifier(names[cte.alias.lower()]))
            copy.meta[COPY_OF] = _named(cte)
            copies.append(copy)
    query.args["with_"].set("expressions", [*query.args["with_"].expressions, *copies])
    for table in reads:
        rename_reads(table, key, names[key])
    return names[key].lower()


def _chain(ctes: dict[str, exp.CTE], key: str) -> set[str]:
    """`key` and the CTEs it reads, directly or not, that are or read a recursion."""
    seen: set[str] = set()
    todo = [key]
    while todo:
        name = todo.pop()
        if name not in seen and _recursive(ctes, name):
            seen.add(name)
            todo += [t.name.lower() for t in _refs_any(ctes[name].this, ctes)]
    return seen


def _named(cte: exp.CTE) -> str:
    """The CTE's name as the statement wrote it (a copy's original), for reasons not to push."""
    return cte.meta.get(COPY_OF, cte.alias)


def _ctes(query: exp.Query) -> dict[str, exp.CTE]:
    return {cte.alias.lower(): cte for cte in query.args["with_"].expressions}


def _leaves(query: exp.Query) -> list[exp.Select] | None:
    """The SELECTs whose rows the final query combines: itself, or the branches of its UNION,
    INTERSECT or EXCEPT (each branch's rows are the same with the push, so their combination
    is too); None for another shape."""
    if isinstance(query, exp.Select):
        return [query]
    if isinstance(query, exp.Subquery) and not query.args.get("alias"):
        return _leaves(query.this)
    if isinstance(query, exp.SetOperation):
        left, right = _leaves(query.left), _leaves(query.right)
        return None if left is None or right is None else left + right
    return None


Filters = dict[str, tuple[list[exp.Expr], str]]  # column (lower) -> templates over MARK, as written


def _filters(leaf: exp.Select, table: exp.Table) -> Filters:
    """The conjuncts of `leaf`'s WHERE that compare one column of its source `table` with
    constants, as templates over MARK, by column."""
    where = leaf.args.get("where")
    if where is None:
        return {}
    found: Filters = {}
    only_source = len(sources(leaf)) == 1
    for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        filtered = _filtered_column(conjunct, table, only_source)
        if filtered is not None:
            template = conjunct.copy().transform(
                lambda n, c=filtered: exp.column(MARK) if _same_column(n, c) else n)
            templates, _ = found.setdefault(filtered.name.lower(), ([], filtered.name))
            templates.append(template)
    return found


def _either(filters: list[Filters]) -> list[tuple[str, list[exp.Expr], str]]:
    """For a CTE read several times: per column every read filters, the one predicate that
    holds for any row some read keeps (the OR of the reads' filters). Each read keeps its own
    filter in the final query, so it gets the rows it got without the push."""
    wanted: list[tuple[str, list[exp.Expr], str]] = []
    for name in filters[0]:
        if not all(name in f for f in filters):
            continue
        per_read = [exp.and_(*f[name][0]) if len(f[name][0]) > 1 else f[name][0][0] for f in filters]
        either: exp.Expr = exp.or_(*[p.copy() for p in per_read])
        wanted.append((name, [either], _show(either, filters[0][name][1])))
    return wanted


def _show_all(templates: list[exp.Expr], column: str) -> str:
    return " AND ".join(_show(t, column) for t in templates)


def _push(query: exp.Query, ctes: dict[str, exp.CTE], key: str, column: str,
          templates: list[exp.Expr], filtered_reads: int = 1) -> str:
    """Push `templates` (predicates over MARK) on `column` of CTE `key` into the recursion under
    it; the name of the recursive CTE whose anchors now hold them. `filtered_reads`: how many
    reads of `key` the templates cover (every other read needs rows they remove)."""
    cte = ctes[key]
    if _mutual(ctes, key):
        raise _NotPushed("it is mutually recursive with another CTE (not handled)")
    reads = _reads(query, ctes, key)
    if reads != filtered_reads:
        others = reads - filtered_reads
        raise _NotPushed(f"{_named(cte)} has {others} other read{'s' if others > 1 else ''} in the "
                         f"statement, which need{'' if others > 1 else 's'} the whole recursion")
    columns = _columns(cte)
    if column not in columns:
        raise _NotPushed(f"{_named(cte)} has no column {column}")
    index = columns.index(column)
    branches, _ = branches_of(cte.this)
    if not any(_refs(b, key) for b in branches):
        return _push_through_projection(query, ctes, cte, index, templates)
    if cte.meta.get("max_recursion_level") is not None:
        raise _NotPushed("it has a recursion level limit, which the unfiltered recursion may "
                         "reach where the filtered one does not")
    alias = cte.args["alias"]
    head = alias.columns[index] if alias is not None and alias.columns else None
    if isinstance(head, AggregateColumn):
        raise _NotPushed(f"{head.name} is aggregated: its value depends on rows the filter removes")
    try:
        anchors = _anchors_if_carried(cte, key, branches, columns[index], index)
        backwards = None
    except _NotPushed as reason:
        backwards = _reversed_closure(cte, key, branches, index)
        if backwards is None:
            raise reason from None
        anchors = _anchors_if_carried(cte, key, [branches[0], backwards], columns[index], index)
    pushed = [(branch, _anchor_filter(branch, number, index, templates)) for number, branch in anchors]
    if backwards is not None:
        branches[1].replace(backwards)
    for branch, predicate in pushed:
        branch.where(predicate, copy=False)
    if backwards is not None:
        return (f"{cte.alias}, evaluated backwards from the bound column (its linear rule "
                f"reversed: {backwards.sql('rasql')})")
    return cte.alias


def _anchors_if_carried(cte: exp.CTE, key: str, branches: list[exp.Query], name: str,
                        index: int) -> list[tuple[int, exp.Query]]:
    """The base branches (numbered), if every recursive branch carries column `name` unchanged."""
    anchors = []
    for number, branch in enumerate(branches, start=1):
        refs = _refs(branch, key)
        if not refs:
            anchors.append((number, branch))
        elif len(refs) > 1:
            raise _NotPushed(f"branch {number} reads {_named(cte)} {len(refs)} times (non-linear "
                             "recursion is not handled)")
        else:
            _check_carried(branch, number, refs[0], name, index)
    return anchors


def _reversed_closure(cte: exp.CTE, key: str, branches: list[exp.Query], index: int) -> exp.Select | None:
    """For a transitive closure `tc(A, B) <- E(A, B); tc(A, B) <- tc(A, Z), E(Z, B)` (set
    semantics, no aggregate, the base branch first and exactly E's two columns), the other
    linear rule `tc(A, B) <- E(A, Z), tc(Z, B)` (or back): both derive the closure of E, and the
    reversed one carries the column the original computes, so a binding on it can start the
    recursion. None when `cte` is not that shape."""
    _, alls = branches_of(cte.this)
    alias = cte.args.get("alias")
    if any(alls) or len(branches) != 2 or _refs(branches[0], key) or len(_columns(cte)) != 2 \
            or any(isinstance(c, AggregateColumn) for c in (alias.columns if alias else [])):
        return None
    anchor, linear = branches
    edge = _edge(anchor)
    if edge is None or not isinstance(linear, exp.Select) or has_clauses(linear, "joins", "where"):
        return None
    table, source, target = edge
    tables = sources(linear)
    refs = [t for t in tables if isinstance(t, exp.Table) and is_cte_reference(t, {key})]
    others = [t for t in tables if t not in refs]
    if len(tables) != 2 or len(refs) != 1 or len(others) != 1 or not isinstance(others[0], exp.Table) \
            or others[0].args.get("db") or others[0].name.lower() != table:
        return None
    condition = single_equality(linear)
    outputs = [e.unalias() for e in linear.expressions]
    if condition is None or len(outputs) != 2 or not all(isinstance(c, exp.Column) for c in outputs):
        return None
    ref, edge_alias = refs[0].alias_or_name.lower(), others[0].alias_or_name.lower()
    a, b = _columns(cte)

    def named(columns):
        return [(c.table.lower(), c.name.lower()) for c in columns]
    shape, joined = named(outputs), set(named(condition))
    if shape == [(ref, a), (edge_alias, target)] and joined == {(ref, b), (edge_alias, source)} \
            and index == 1:  # right-linear, B bound: E(A, Z), tc(Z, B)
        outs, on = [(edge_alias, source), (ref, b)], ((edge_alias, target), (ref, a))
    elif shape == [(edge_alias, source), (ref, b)] and joined == {(edge_alias, target), (ref, a)} \
            and index == 0:  # left-linear, A bound: tc(A, Z), E(Z, B)
        outs, on = [(ref, a), (edge_alias, target)], ((ref, b), (edge_alias, source))
    else:
        return None

    written = {(c.table.lower(), c.name.lower()): c for c in (*outputs, *condition)}

    def col(pair):  # every column the reversed rule names is one the original names
        return written[pair].copy()
    return (exp.select(*(col(o) for o in outs)).from_(refs[0].copy())
            .join(others[0].copy(), on=exp.EQ(this=col(on[0]), expression=col(on[1]))))


def _edge(anchor: exp.Query) -> tuple[str, str, str] | None:
    """(table, source column, target column) of a base branch `SELECT s, d FROM E`."""
    if not isinstance(anchor, exp.Select) or has_clauses(anchor):
        return None
    tables = sources(anchor)
    if len(tables) != 1 or not isinstance(tables[0], exp.Table) or tables[0].args.get("db") \
            or not isinstance(tables[0].this, exp.Identifier):
        return None
    outputs = [e.unalias() for e in anchor.expressions]
    if len(outputs) != 2 or not all(isinstance(c, exp.Column) and c.table.lower() in (
            "", tables[0].alias_or_name.lower()) for c in outputs):
        return None
    return tables[0].name.lower(), outputs[0].name.lower(), outputs[1].name.lower()


def _push_through_projection(query, ctes, cte: exp.CTE, index: int, templates) -> str:
    """A non-recursive CTE `SELECT a, b FROM r` (a stored view's expansion): push into `r`."""
    body = cte.this
    if not any(_recursive(ctes, t.name.lower()) for t in _refs_any(body, ctes)):
        raise _NoRecursion()
    if not isinstance(body, exp.Select) or has_modifiers(body) or any(
            body.args.get(k) for k in ("group", "having", "joins", "qualify", "windows")) \
            or body.find(exp.AggFunc, exp.Window) is not None:
        raise _NotPushed(f"{_named(cte)} is not a plain projection of a recursive CTE")
    source = body.args.get("from_") or body.args.get("from")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or not is_cte_reference(table, ctes):
        raise _NotPushed(f"{_named(cte)} is not a plain projection of a recursive CTE")
    inner_columns = _columns(ctes[table.name.lower()])
    if len(body.expressions) == 1 and isinstance(body.expressions[0], exp.Star):
        inner = inner_columns[index] if index < len(inner_columns) else None
    else:
        expression = body.expressions[index].unalias() if index < len(body.expressions) else None
        inner = expression.name.lower() if isinstance(expression, exp.Column) \
            and expression.table.lower() in ("", table.alias_or_name.lower()) else None
    if inner is None:
        raise _NotPushed(f"{_named(cte)}'s column is computed, not read from {table.alias_or_name}")
    return _push(query, ctes, table.name.lower(), inner, templates)


def _check_carried(branch: exp.Query, number: int, ref: exp.Table, name: str, index: int) -> None:
    """Branch `number` outputs, at `index`, its reference's column `name` unchanged."""
    inner = _search_cycle_term(branch, index)
    if inner is not None:  # SEARCH/CYCLE's own wrapper: the user's term is inside it
        branch = inner
    if not isinstance(branch, exp.Select) or ref.parent_select is not branch:
        raise _NotPushed(f"branch {number} reads the recursion in a subquery")
    if has_modifiers(branch) or branch.find(exp.Window) is not None:
        raise _NotPushed(f"branch {number} has a window, ORDER BY or LIMIT over rows the filter removes")
    expressions = branch.expressions
    if any(isinstance(e, exp.Star) for e in expressions) or index >= len(expressions):
        raise _NotPushed(f"branch {number} selects *")
    output = expressions[index].unalias()
    single = len(sources(branch)) == 1
    carried = isinstance(output, exp.Column) and output.name.lower() == name \
        and (output.table.lower() == ref.alias_or_name.lower() or (not output.table and single))
    if not carried:
        raise _NotPushed(f"column {name} is not carried unchanged by recursive branch {number} "
                         f"(it outputs {output.sql('rasql')})")
    group = branch.args.get("group")
    if group is not None and not any(_same_column(g, output) for g in group.expressions):
        raise _NotPushed(f"branch {number} aggregates over rows of several {name} values")


def _search_cycle_term(branch: exp.Query, index: int) -> exp.Select | None:
    """The user's recursive term inside the SEARCH/CYCLE rewrite's wrapper (`SELECT w.c1, ...,
    <extras> FROM (term) AS __search_cycle(c1, ...) WHERE <not a cycle>`) when the wrapper
    outputs the term's column `index` unchanged; None for any other branch. The wrapper only
    adds the SEARCH/CYCLE columns and stops at a cycle: a column the term carries, the whole
    branch carries."""
    source = branch.args.get("from_") if isinstance(branch, exp.Select) else None
    derived = source.this if source is not None else None
    if not isinstance(derived, exp.Subquery) or derived.alias != WRAPPER \
            or not isinstance(derived.this, exp.Select) or branch.args.get("joins"):
        return None
    columns = derived.args["alias"].columns
    output = branch.expressions[index].unalias() if index < len(branch.expressions) else None
    if not isinstance(output, exp.Column) or output.table != WRAPPER or index >= len(columns) \
            or output.name != columns[index].name:
        return None
    return derived.this


def _anchor_filter(branch: exp.Query, number: int, index: int, templates: list[exp.Expr]) -> exp.Expr:
    """The pushed predicates over anchor `branch`'s output column `index`, for its WHERE."""
    if not isinstance(branch, exp.Select) or has_modifiers(branch) \
            or branch.find(exp.Window) is not None:
        raise _NotPushed(f"base branch {number} is not a plain SELECT (set operation, window, "
                         "ORDER BY or LIMIT)")
    expressions = branch.expressions
    if any(isinstance(e, exp.Star) for e in expressions) or index >= len(expressions):
        raise _NotPushed(f"base branch {number} selects *")
    output = expressions[index].unalias()
    if any(not isinstance(node, FILTERABLE_NODES) for node in output.walk()):
        raise _NotPushed(f"base branch {number} computes the column as {output.sql('rasql')}, "
                         "which its WHERE cannot filter")
    value = output if isinstance(output, (exp.Column, exp.Literal)) else exp.Paren(this=output)
    predicates = [t.copy().transform(
        lambda n: value.copy() if isinstance(n, exp.Column) and n.name == MARK else n)
        for t in templates]
    return exp.and_(*predicates) if len(predicates) > 1 else predicates[0]


def _filtered_column(conjunct: exp.Expr, table: exp.Table, only_source: bool) -> exp.Column | None:
    """The column of `table` that `conjunct` compares with constants, if it has that shape."""
    if isinstance(conjunct, (exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        sides = [conjunct.this, conjunct.expression]
        columns = [s for s in sides if isinstance(s, exp.Column)]
        others = [s for s in sides if not isinstance(s, exp.Column)]
        if len(columns) != 1 or not _constant(others[0]):
            return None
        column = columns[0]
    elif isinstance(conjunct, exp.In) and not conjunct.args.get("query") \
            and not conjunct.args.get("unnest") and conjunct.expressions:
        column = conjunct.this
        if not all(_constant(e) for e in conjunct.expressions):
            return None
    elif isinstance(conjunct, exp.Between):
        column = conjunct.this
        if not (_constant(conjunct.args["low"]) and _constant(conjunct.args["high"])):
            return None
    else:
        return None
    if not isinstance(column, exp.Column) or column.args.get("db"):
        return None
    if column.table.lower() == table.alias_or_name.lower() or (not column.table and only_source):
        return column
    return None


def _constant(node: exp.Expr) -> bool:
    return all(isinstance(n, CONSTANT_NODES) for n in node.walk())


def _same_column(node: exp.Expr, column: exp.Column) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() == column.name.lower() \
        and node.table.lower() == column.table.lower()


def _show(template: exp.Expr, column: str) -> str:
    return template.copy().transform(
        lambda n: exp.column(column) if isinstance(n, exp.Column) and n.name == MARK else n
    ).sql("rasql")




def _refs(branch: exp.Expr, key: str) -> list[exp.Table]:
    return [t for t in branch.find_all(exp.Table) if is_cte_reference(t, {key})]


def _reads(query: exp.Query, ctes: dict[str, exp.CTE], key: str) -> int:
    """Reads of CTE `key` in the statement outside its own definition."""
    final = query.copy()
    final.set("with_", None)
    return len(_refs(final, key)) + sum(len(_refs(c.this, key)) for k, c in ctes.items() if k != key)


def _columns(cte: exp.CTE) -> list[str]:
    """A CTE's column names, lower-case: its column list, else its first branch's output names."""
    alias = cte.args.get("alias")
    if alias is not None and alias.columns:
        return [c.name.lower() for c in alias.columns]
    first = branches_of(cte.this)[0][0]
    return [e.alias_or_name.lower() for e in first.expressions] if isinstance(first, exp.Select) else []


def _mutual(ctes: dict[str, exp.CTE], key: str) -> bool:
    """`key` is in a recursive group with another CTE (reaches one that reaches it back)."""
    def reached(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for t in _refs_any(ctes[todo.pop()].this, ctes):
                name = t.name.lower()
                if name not in seen:
                    seen.add(name)
                    todo.append(name)
        return seen
    return any(key in reached(other) for other in reached(key) if other != key)


def _recursive(ctes: dict[str, exp.CTE], key: str) -> bool:
    """CTE `key` is recursive, or reads one that is."""
    seen, todo = set(), [key]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        reads = {t.name.lower() for t in _refs_any(ctes[name].this, ctes)}
        if name in reads or _mutual(ctes, name):
            return True
        todo.extend(reads)
    return False


def _refs_any(node: exp.Expr, ctes) -> list[exp.Table]:
    return [t for t in node.find_all(exp.Table) if is_cte_reference(t, ctes)]
