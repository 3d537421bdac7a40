"""Stage 2: a parsed query -> `QueryPlan` (recursive groups, strata, delta rules, partitioning).

`plan_query` returns None for a query that needs nothing from recsql (no recursion, no head
aggregate): such a query goes to Spark untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from sqlglot import exp

from recsql.errors import RecSQLAnalysisError, RecSQLParseError
from recsql.parser.dialect import AggregateColumn
from recsql.parser.locate import locate
from recsql.planner import aggregates, checks, doubling, keybound, seeds
from recsql.planner.branches import bound_table, branches_of, sources
from recsql.planner.catalog import Catalog
from recsql.planner.demand import push_demand
from recsql.planner.invariants import mark_invariant_subqueries
from recsql.planner.limits import split_limited_reads
from recsql.planner.model import (
    AGGREGATES,
    ALL,
    DELTA,
    PAYLOADS,
    SUMMING,
    BaseRelation,
    Branch,
    ComparedColumn,
    CTEPlan,
    GroupStep,
    HeadColumn,
    QueryPlan,
    Ref,
    RefJoin,
    Step,
    ViewStep,
    cte_binding,
)
from recsql.planner.names import TableName, is_cte_reference
from recsql.planner.scc import strongly_connected
from recsql.planner.scoping import hoist_nested_withs
from recsql.planner.search_cycle import COMPARED, rewrite_search_cycle
from recsql.planner.spelling import to_head_aggregates

E = TypeVar("E", bound=exp.Expr)

NOT_PREMAPPABLE = (
    "it is not pre-mappable: its value over a union is not a function of its values over the "
    "parts, so it cannot be pushed into the recursion (use min, max, sum, count, bit_or, bit_and, "
    "bool_or, bool_and, or an aggregate declared with CREATE AGGREGATE)"
)


@dataclass
class CTEDef:
    """A CTE as written, before planning."""

    name: str
    node: exp.CTE
    body: exp.Query
    column_list: list[exp.Expr] | None

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def has_head_aggregate(self) -> bool:
        return any(isinstance(c, AggregateColumn) for c in self.column_list or [])


@dataclass(frozen=True)
class Draft:
    """A statement on its way through the planner's rewrites (`RULES`): the query as rewritten
    so far, what the rewrites found, and the statement they read. Each rule takes a draft and
    returns one (the same draft when it changes nothing)."""

    query: exp.Query
    sql: str
    catalog: Catalog
    # the query as written, then as the rewrites that spell it another way left it: before those
    # that add copies of CTEs, whose names are no names to suggest in errors
    as_written: exp.Query
    demand: bool = True  # push the final query's filters on recursive CTEs into their anchors
    notes: tuple[str, ...] = ()  # what demand pushed or refused (EXPLAIN's `demand:` lines)
    targets: Mapping[str, int] = field(default_factory=dict)  # row targets of LIMITed CTE reads

    @property
    def with_(self) -> exp.With | None:
        found = self.query.args.get("with_")
        return found if isinstance(found, exp.With) else None

    @cached_property
    def graph(self) -> tuple[dict[str, CTEDef], dict[str, set[str]], list[list[str]]]:
        """The CTEs as written, what each reads, and the strongly connected components in
        dependency order (computed once per draft: a rule that rewrites makes a new one)."""
        if self.with_ is None:  # never: a rule reads the graph only of a statement with CTEs
            raise AssertionError("a statement without WITH has no CTE graph")
        return _analyse(self.with_)

    def rewritten(self, query: exp.Query, *, as_written: bool = False, **found) -> Draft:
        """This draft with `query` (and what the rule found); itself when nothing changed.
        `as_written`: the rewrite spells what the user wrote another way (no copies added)."""
        if query is self.query and not found:
            return self
        written = query if as_written else self.as_written
        draft = dataclasses.replace(self, query=query, as_written=written, **found)
        if query is self.query and "graph" in self.__dict__:  # the same CTEs: analysed once
            draft.__dict__["graph"] = self.graph
        return draft


def expand_search_cycle(draft: Draft) -> Draft:
    """SEARCH and CYCLE clauses as columns computed in the CTE's body (`search_cycle.py`)."""
    def columns_of(cte: exp.CTE) -> list[str]:
        return _head_names(cte, draft.sql, draft.catalog)

    return draft.rewritten(rewrite_search_cycle(draft.query, draft.sql, columns_of), as_written=True)


def hoist_withs(draft: Draft) -> Draft:
    """WITHs nested in CTE bodies moved to the top-level WITH (`scoping.py`)."""
    return draft.rewritten(hoist_nested_withs(draft.query), as_written=True)


def spell_head_aggregates(draft: Draft) -> Draft:
    """GROUP BY in recursive terms as RaSQL head aggregates (`spelling.py`)."""
    if draft.with_ is None:
        return draft
    _, deps, components = draft.graph
    spelled = to_head_aggregates(draft.query, draft.sql, _recursive_groups(deps, components), _cte_tables,
                                 lambda name: draft.catalog.aggregate(name) is not None)
    return draft.rewritten(spelled, as_written=True)


def push_filters(draft: Draft) -> Draft:
    """The final query's filters on recursive CTEs pushed into their anchors (`demand.py`)."""
    if draft.with_ is None or not draft.demand:
        return draft
    pushed = push_demand(draft.query)
    if pushed.query is draft.query and not pushed.notes:
        return draft
    return draft.rewritten(pushed.query, notes=tuple(pushed.notes))


def split_limits(draft: Draft) -> Draft:
    """A CTE copy per LIMITed read of a UNION ALL recursion, with its row target (`limits.py`)."""
    if draft.with_ is None:
        return draft
    _, deps, components = draft.graph
    alone = {c[0] for c in components if len(c) == 1 and c[0] in deps[c[0]]}
    groups = {key: set(c) for c in components if len(c) > 1 for key in c}
    query, targets = split_limited_reads(draft.query, alone, groups)
    return draft.rewritten(query, targets=targets) if targets else draft


# The planner's rewrites, in order, each `rule(draft) -> draft` (as sqlglot's `optimizer.RULES`)
RULES: tuple[Callable[[Draft], Draft], ...] = (
    expand_search_cycle,
    hoist_withs,
    spell_head_aggregates,
    push_filters,
    split_limits,
)


def plan_query(query: exp.Query, sql: str, catalog: Catalog, demand: bool = True) -> QueryPlan | None:
    """Plan `query` (a SELECT/UNION with a WITH clause), or None if Spark can run it as is.

    `demand`: push the final query's filters on recursive CTEs into their anchors."""
    draft = Draft(query, sql, catalog, as_written=query, demand=demand)
    for rule in RULES:
        draft = rule(draft)
    if draft.with_ is None:
        return None
    defs, deps, components = draft.graph
    recursive = [c for c in components if len(c) > 1 or c[0] in deps[c[0]]]
    if not recursive and not any(d.has_head_aggregate for d in defs.values()):
        return None
    checks.check_tables(draft.as_written, sql, catalog, set())
    checks.check_unimplemented(draft.as_written, sql)
    query = draft.query.copy()
    query.set("with_", None)
    planner = _Planner(sql, catalog, defs, deps)
    steps = [planner.step(component) for component in components]
    _limit_ends_recursion(dict(draft.targets), steps)
    for step in steps:
        if isinstance(step, GroupStep):
            checks.check_steps_end(step, sql)
    final = planner.bind_ctes(query, set(defs))
    plan = QueryPlan(steps=steps, final=final, sql=sql, demand=list(draft.notes))
    plan.parameters = {p.name for p in query.find_all(exp.Placeholder) if not p.args.get("widget")}
    for step in steps:
        for node in _step_queries(step):
            plan.parameters |= {
                p.name for p in node.find_all(exp.Placeholder) if not p.args.get("widget")
            }
    return plan


def _analyse(with_: exp.With) -> tuple[dict[str, CTEDef], dict[str, set[str]], list[list[str]]]:
    defs = _cte_defs(with_)
    deps = {key: _references(d.body, defs) for key, d in defs.items()}
    return defs, deps, strongly_connected(list(defs), deps)


def _recursive_groups(deps: dict[str, set[str]], components: list[list[str]]) -> dict[str, set[str]]:
    """Each recursive CTE's recursive group (the CTEs it reaches its fixpoint with)."""
    return {key: set(c) for c in components if len(c) > 1 or c[0] in deps[c[0]] for key in c}


def _head_names(cte: exp.CTE, sql: str, catalog: Catalog) -> list[str]:
    """A CTE's column names as the planner sees them (for the SEARCH/CYCLE rewrite)."""
    with_ = cte.parent
    defs = _cte_defs(with_) if isinstance(with_, exp.With) else {}
    heads = _Heads(sql, catalog, {**defs, cte.alias.lower(): _cte_def(cte)})
    return [c.name for c in heads.head_of(cte.alias.lower())]


def _limit_ends_recursion(targets: dict[str, int], steps: list[Step]) -> None:
    """A LIMIT Spark pushes into a UNION ALL recursion (see `limits`) ends it once that many
    rows exist; a UNION or aggregate recursion runs to its fixpoint. In a mutually recursive
    group of UNION ALL CTEs, the one limited CTE's rows count."""
    for step in steps:
        if not isinstance(step, GroupStep) or not all(c.bag for c in step.ctes):
            continue
        limited = [c.key for c in step.ctes if c.key in targets]
        if len(limited) == 1:
            step.row_target = targets[limited[0]]
            step.row_target_cte = limited[0]


def _step_queries(step: Step) -> list[exp.Expr]:
    if isinstance(step, ViewStep):
        return [step.query]
    return [b.select for cte in step.ctes for b in cte.branches]


def _cte_defs(with_: exp.With) -> dict[str, CTEDef]:
    defs: dict[str, CTEDef] = {}
    for cte in with_.expressions:
        alias = cte.args.get("alias")
        d = _cte_def(cte)
        if d.key in defs:
            raise RecSQLAnalysisError(
                f"CTE `{d.name}` is defined twice in one WITH clause; rename one of them",
                condition="RECSQL_DUPLICATE_CTE",
                **locate(alias.this if alias else cte),
            )
        defs[d.key] = d
    return defs


def _cte_def(cte: exp.CTE) -> CTEDef:
    alias = cte.args.get("alias")
    columns = list(alias.columns) if alias is not None and alias.columns else None
    return CTEDef(name=cte.alias, node=cte, body=cte.this, column_list=columns)


def _references(node: exp.Expr, defs: dict[str, CTEDef]) -> set[str]:
    return {t.name.lower() for t in _cte_tables(node, defs)}


def _cte_tables(node: exp.Expr, names) -> list[exp.Table]:
    return [t for t in node.find_all(exp.Table) if is_cte_reference(t, names)]


class _Heads:
    """The head columns of the CTEs `defs` as written: their names (`*` expanded over earlier
    CTEs' heads and the catalog's tables, as Spark expands it), aggregates and payloads."""

    def __init__(self, sql: str, catalog: Catalog, defs: dict[str, CTEDef]) -> None:
        self.sql = sql
        self.catalog = catalog
        self.defs = defs

    def head(self, d: CTEDef, first_branch: exp.Query) -> tuple[HeadColumn, ...]:
        if d.column_list is None:  # as Spark: the names of the first (anchor) branch's output
            return tuple(HeadColumn(name) for name in self.output_names(first_branch))
        head = tuple(self.head_column(c) for c in d.column_list)
        summing = next((c for c in head if c.agg in SUMMING), None)
        for node, column in zip(d.column_list, head):
            if column.of is not None and summing is not None:
                raise RecSQLAnalysisError(
                    f"Payload column `{column.render()}` of CTE `{d.name}` is not supported in a "
                    f"head with `{summing.agg}() AS {summing.name}`: a sum/count head keeps every "
                    "contributor, not one winning derivation; compute the payload in a separate "
                    "CTE with min()/max() only",
                    condition="RECSQL_INVALID_PAYLOAD",
                    **locate(node, self.sql),
                )
        return tuple(self.payload_column(d, c, column, head) if column.of is not None else column
                     for c, column in zip(d.column_list, head))

    def output_names(self, query: exp.Expr) -> list[str]:
        """The column names a query outputs, `*` expanded over its sources as Spark does
        (VALUES aliases, earlier CTEs' heads, catalog tables)."""
        if isinstance(query, exp.Subquery):
            return self.output_names(query.this)
        if isinstance(query, exp.Values):
            return _values_names(query)
        if not isinstance(query, exp.Selectable):  # never: a branch or a derived table's body
            raise AssertionError(f"a {type(query).__name__} has no output columns")
        if not isinstance(query, exp.Select):
            return _output_names(query)
        names: list[str] = []
        for e in query.selects:
            star_of = _star_source(e)
            if star_of is None:
                names.append(e.alias_or_name or e.sql("rasql"))
                continue
            expanded = [n for source in sources(query) if star_of in ("", source.alias_or_name.lower())
                        for n in self.source_names(source)]
            names.extend(expanded or ["*"])
        return names

    def source_names(self, source: exp.Expr) -> list[str]:
        alias = source.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return [c.name for c in alias.columns]
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            if is_cte_reference(source, self.defs):
                return [c.name for c in self.head_of(source.name.lower())]
            return list(self.catalog.columns(TableName.of(source)) or [])
        if isinstance(source, (exp.Subquery, exp.Values)):
            return self.output_names(source.this if isinstance(source, exp.Subquery) else source)
        return []

    def head_column(self, column: exp.Expr) -> HeadColumn:
        if isinstance(column, AggregateColumn) and column.func.lower() in PAYLOADS:
            if column.of is None:
                raise RecSQLAnalysisError(
                    f"Payload column `{column.name}` must name the min() or max() column whose "
                    f"winner it follows, e.g. `{column.func}(Cost) AS {column.name}`",
                    condition="RECSQL_INVALID_PAYLOAD",
                    **locate(column, self.sql),
                )
            return HeadColumn(column.name, of=column.of, extremum=PAYLOADS[column.func.lower()],
                              location=locate(column, self.sql))
        if isinstance(column, AggregateColumn):
            agg = AGGREGATES.get(column.func.lower())
            if agg is not None:
                return HeadColumn(column.name, agg, location=locate(column, self.sql))
            declared = self.catalog.aggregate(column.func)
            if declared is None:
                raise RecSQLAnalysisError(
                    f"Head aggregate `{column.func}()` of column `{column.name}` is not "
                    f"supported: {NOT_PREMAPPABLE}",
                    condition="RECSQL_UNSUPPORTED_HEAD_AGGREGATE",
                    **locate(column, self.sql),
                )
            return HeadColumn(column.name, declared.name.lower(), declared=declared,
                              location=locate(column, self.sql))
        return HeadColumn(column.name)

    def payload_column(self, d: CTEDef, node: exp.Expr, column: HeadColumn,
                       head: tuple[HeadColumn, ...]) -> HeadColumn:
        """A payload `argmin(Cost) AS Pred` follows a min() (argmax: a max()) column of the same
        head; anything else is an error naming what it found."""
        of = next((c for c in head if c.name.lower() == str(column.of).lower()), None)
        problem = None
        if of is None:
            problem = (f"`{d.name}` has no column `{column.of}`"
                       f"{checks.did_you_mean(str(column.of), [c.name for c in head])}")
        elif of.agg is None:
            kind = "payload" if of.of is not None else "group-key"
            problem = (f"`{of.name}` is a {kind} column; a payload follows the winner of a "
                       f"min() (argmin) or max() (argmax) column")
        elif of.agg != column.extremum:
            problem = f"`{of.name}` is `{of.agg}()`; write `arg{of.agg}({of.name}) AS {column.name}`"
        if problem is not None or of is None:
            raise RecSQLAnalysisError(
                f"Payload column `arg{column.extremum}({column.of}) AS {column.name}` of CTE "
                f"`{d.name}` is not valid: {problem}",
                condition="RECSQL_INVALID_PAYLOAD",
                **locate(node, self.sql),
            )
        return HeadColumn(column.name, of=of.name, extremum=column.extremum, location=column.location)

    def head_of(self, key: str) -> list[HeadColumn]:
        d = self.defs[key]
        return list(self.head(d, branches_of(d.body)[0][0]))


class _Planner(_Heads):
    def __init__(self, sql, catalog, defs, deps) -> None:
        super().__init__(sql, catalog, defs)
        self.deps = deps
        self.strata: dict[str, int] = {}

    def step(self, component: list[str]) -> Step:
        stratum = 1 + max(
            (self.strata[d] for key in component for d in self.deps[key] if d not in component),
            default=-1,
        )
        for key in component:
            self.strata[key] = stratum
        members = set(component)
        is_group = len(component) > 1 or component[0] in self.deps[component[0]]
        first = self.defs[component[0]]
        if not is_group and not first.has_head_aggregate:
            query = self.bind_ctes(first.body.copy(), set(self.strata) - members)
            columns = tuple(c.name for c in first.column_list or [])
            return ViewStep(name=first.name, query=query, stratum=stratum, columns=columns)
        ctes = [self.cte(self.defs[key], members) for key in component]
        step = GroupStep(ctes=ctes, stratum=stratum)
        checks.check_group(step, self.sql)
        for cte in ctes:
            for branch in cte.base_branches:
                branch.bases = self.bind_partitioned_reads(branch, cte, ctes)
            cte.key_bound = keybound.key_bound(cte)
        return step

    def cte(self, d: CTEDef, members: set[str]) -> CTEPlan:
        bodies, alls = branches_of(d.body.copy())
        for index, body in enumerate(bodies, start=1):
            if not isinstance(body, exp.Query):  # `(1 UNION SELECT ...)` parses, as an expression
                raise RecSQLParseError(
                    f"Syntax error: branch {index} of CTE `{d.name}` is `{body.sql('rasql')}`, not a "
                    "query; write it as `SELECT ...`",
                    condition="PARSE_SYNTAX_ERROR", **locate(body))
        bag = bool(alls) and all(alls)
        head = self.head(d, bodies[0])
        cte = CTEPlan(name=d.name, head=head, branches=[], bag=bag,
                      level_limit=d.node.meta.get("max_recursion_level"),
                      compared=tuple(ComparedColumn(*c) for c in d.node.meta.get(COMPARED, ())))
        if bag and cte.aggregates:
            raise RecSQLAnalysisError(
                f"CTE `{d.name}` has head aggregates but its branches are joined by UNION ALL; "
                "aggregates need set recursion: use UNION",
                condition="RECSQL_AGGREGATE_WITH_UNION_ALL",
                **locate(d.node.args["alias"].this),
            )
        for index, body in enumerate(bodies, start=1):
            cte.branches.append(self.branch(cte, index, body, members))
        cte.doubling = doubling.doubling_branch(cte)
        if cte.doubling is not None:
            cte.doubling_switch = doubling.switch_variants(cte.doubling)
        return cte

    def branch(self, cte: CTEPlan, index: int, body: exp.Query, members: set[str]) -> Branch:
        checks.check_branch_columns(cte, index, body, self.sql, self.defs[cte.key].node.args["alias"].this)
        group_tables = _cte_tables(body, members)
        refs = []
        for k, table in enumerate(group_tables):
            ref = Ref(binding=f"rq_r{k}", cte=table.name.lower(), alias=table.alias_or_name)
            refs.append(ref)
            table.replace(bound_table(ref.binding, ref.alias))
        branch = Branch(index=index, select=body, refs=tuple(refs), seeded=seeds.is_seeded(body))
        if not branch.recursive:
            self.bind_ctes(body, set(self.strata) - members)
            if cte.summing:
                branch.contributor = tuple(_output_exprs(body))
            return branch
        head_names = {k: [c.name for c in self.head_of(k)] for k in members}
        checks.check_recursive_branch(cte, branch, self.group_ctes(members), self.sql, head_names)
        branch.variants = _variants(len(refs), cte.bag)
        if cte.summing:
            branch.contributor = self.contributor(branch, members)
        branch.bases = self.bind_bases(branch, members)
        self.bind_ctes(body, set(self.strata) - members)
        mark_invariant_subqueries(body, {r.binding for r in refs})
        return branch

    def group_ctes(self, members: set[str]) -> dict[str, CTEDef]:
        return {k: self.defs[k] for k in members}

    def contributor(self, branch: Branch, members: set[str]) -> tuple[exp.Expr, ...]:
        """A recursive branch's contributor: the group key of each recursive row it reads, plus
        the join columns of the other tables when it joins two or more (docs/dialect.md section 2)."""
        parts: list[exp.Expr] = []
        for ref in branch.refs:
            for column in self.head_of(ref.cte):
                if column.is_key:
                    parts.append(exp.column(column.name, table=ref.alias, quoted=True))
        ref_aliases = {r.alias.lower() for r in branch.refs}
        others = [t for t in _source_tables(branch.select) if t.alias_or_name.lower() not in ref_aliases]
        if len(others) >= 2:
            other_aliases = {t.alias_or_name.lower() for t in others}
            for left, right in checks.equi_joins(branch.select):
                for side in (left, right):
                    if side.table.lower() in other_aliases:
                        parts.append(side.copy())
        return tuple(parts)

    def bind_bases(self, branch: Branch, members: set[str]) -> tuple[BaseRelation, ...]:
        """Base tables joined to a recursive reference on that reference's group-key columns are
        pre-partitioned by their join columns, so the join needs no shuffle of the base side."""
        ref_keys = {
            r.alias.lower(): [c.name.lower() for c in self.head_of(r.cte) if c.is_key]
            for r in branch.refs
        }
        join_columns: dict[str, dict[int, str]] = {}
        for left, right in checks.equi_joins(branch.select):
            for ref_side, base_side in ((left, right), (right, left)):
                keys = ref_keys.get(ref_side.table.lower())
                if keys and ref_side.name.lower() in keys and base_side.table.lower() not in ref_keys:
                    slot = keys.index(ref_side.name.lower())
                    join_columns.setdefault(base_side.table.lower(), {})[slot] = base_side.name
        bases: list[BaseRelation] = []
        for table in _source_tables(branch.select):
            columns = join_columns.get(table.alias_or_name.lower())
            # a table read with column aliases, a sample, a version or hints is read as written:
            # the partitioned copy would be of the bare table
            if not columns or is_cte_reference(table, self.defs) or not _plain_table(table):
                continue
            self.check_columns(table, columns.values())
            binding = f"rq_base_{len(bases)}"
            partition = tuple(columns[k] for k in sorted(columns))
            joins = _ref_joins(branch, table.alias_or_name, partition,
                               {r.binding: self.head_of(r.cte) for r in branch.refs})
            bases.append(BaseRelation(binding, TableName.of(table), partition, joins))
            table.replace(bound_table(binding, table.alias_or_name))
            if len(ref_keys) == 1 and set(columns) == set(range(len(next(iter(ref_keys.values()))))):
                branch.copartitioned = True
        return tuple(bases)

    def bind_partitioned_reads(self, branch: Branch, cte: CTEPlan,
                               group: list[CTEPlan]) -> tuple[BaseRelation, ...]:
        """A base branch reads a table that a recursive branch of its group pre-partitions from
        that partitioned copy (its own CTE's first): the statement then shuffles the table once,
        not once for the base step and again for the iterations, and a base step grouped by the
        partition columns (`SELECT Src, Src FROM edge` for `cc(X, min() AS C)`) needs no shuffle."""
        partitioned: dict[TableName, BaseRelation] = {}
        for owner in [cte, *group]:
            for recursive in owner.recursive_branches:
                for base in recursive.bases:
                    partitioned.setdefault(base.table, base)
        local = {c.alias_or_name.lower() for c in branch.select.find_all(exp.CTE)}
        # a join of values or distinct rows: a row's multiplicity never counts (not sum/count,
        # not UNION ALL)
        deduplicated = aggregates.kind(cte) in (aggregates.Kind.EXTREMA, aggregates.Kind.SET)
        bases: list[BaseRelation] = []
        for table in _source_tables(branch.select):
            found = partitioned.get(TableName.of(table)) if _plain_table(table) else None
            if found is None or is_cte_reference(table, local | set(self.defs)):
                continue
            binding = f"rq_base_{len(bases)}"
            keys_only = deduplicated and reads_keys_only(branch.select, table, found.columns)
            bases.append(BaseRelation(binding, found.table, found.columns, keys_only=keys_only))
            table.replace(bound_table(binding, table.alias_or_name))
        return tuple(bases)

    def check_columns(self, table: exp.Table, names) -> None:
        known = self.catalog.columns(TableName.of(table))
        if known is None:  # dropped since `check_tables` found it
            raise checks.table_not_found(table, self.sql, self.catalog)
        for name in names:
            if name.lower() not in {k.lower() for k in known}:
                column = next(
                    (c for c in table.root().find_all(exp.Column)
                     if c.name == name and c.table.lower() == table.alias_or_name.lower()),
                    table,
                )
                raise RecSQLAnalysisError(
                    f"Column `{name}` of `{table.alias_or_name}` cannot be resolved"
                    f"{checks.did_you_mean(name, known)} ({TableName.of(table).sql} has {', '.join(known)})",
                    condition="RECSQL_UNKNOWN_COLUMN",
                    **locate(column, self.sql),
                )

    def bind_ctes(self, node: E, names: set[str]) -> E:
        """Replace references to completed CTEs by `{cte_<name>}` bindings."""
        for table in _cte_tables(node, names):
            table.replace(bound_table(cte_binding(table.name), table.alias_or_name))
        return node


def _plain_table(table: exp.Table) -> bool:
    """A catalog table read as it is: no version, sample, hints or column aliases."""
    alias = table.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return False
    extra = {k for k, v in table.args.items() if v and k not in {"this", "db", "catalog", "alias"}}
    return isinstance(table.this, exp.Identifier) and not extra


# the clauses a SELECT may have and still be answered by its table's distinct keys
_ROW_BY_ROW = {"expressions", "from_", "where", "distinct"}


def reads_keys_only(select: exp.Expr, table: exp.Table, columns: tuple[str, ...]) -> bool:
    """Whether `select` reads `table` alone, and of it only `columns`, row by row and
    deterministically: its rows are then a function of each row's `columns` alone, so over the
    table's distinct values of `columns` it gives the same rows, each fewer times. CC's base
    branch `SELECT Src, Src FROM edge` is so: over the edges' copy partitioned by `Src`, its
    distinct `Src` (the adjacency index's keys, one row per vertex) give the same base step as
    every edge. No join, aggregate, window, subquery, LIMIT or other clause; no function whose
    value is not one of the row (`seeds.NON_DETERMINISTIC`), nor one sqlglot does not know (a
    user's function may be non-deterministic).

    >>> from sqlglot import parse_one
    >>> q = parse_one("SELECT e.src, src + 1 FROM edge AS e WHERE src > 0", read="rasql")
    >>> reads_keys_only(q, q.find(exp.Table), ("Src",))
    True
    >>> reads_keys_only(q, q.find(exp.Table), ("Dst",))
    False
    >>> q = parse_one("SELECT src, src FROM edge WHERE dst > 0", read="rasql")
    >>> reads_keys_only(q, q.find(exp.Table), ("src",))
    False
    """
    if not isinstance(select, exp.Select) or any(v for k, v in select.args.items() if k not in _ROW_BY_ROW):
        return False
    read = _source_tables(select)
    if len(read) != 1 or read[0] is not table:
        return False
    parts = [*select.expressions, *([select.args["where"]] if select.args.get("where") else [])]
    keys = {c.lower() for c in columns}
    alias = table.alias_or_name.lower()
    for part in parts:
        if part.find(exp.Star, exp.AggFunc, exp.Window, exp.Query, exp.Subquery, exp.Exists,
                     exp.Anonymous) or seeds.non_deterministic(part):
            return False
        for column in part.find_all(exp.Column):
            if column.args.get("db") or column.table.lower() not in ("", alias) \
                    or column.name.lower() not in keys:
                return False
    return True


def _variants(n_refs: int, bag: bool) -> tuple[tuple[str, ...], ...]:
    """Semi-naive delta rules: one variant per reference, that reference reading the delta and
    the others the whole relation. UNION ALL reads only the previous step."""
    if bag:
        return ((DELTA,) * n_refs,)
    return tuple(tuple(DELTA if i == j else ALL for i in range(n_refs)) for j in range(n_refs))


def _ref_joins(branch: Branch, base_alias: str, columns: tuple[str, ...],
               heads: dict[str, list[HeadColumn]]) -> tuple[RefJoin, ...]:
    """The references of `branch` equi-joined with the base aliased `base_alias` on every one of
    its partition `columns`, each with its own (head) columns in the order of `columns`."""
    base_alias = base_alias.lower()
    pairs = checks.equi_joins(branch.select)
    joins = []
    for ref in branch.refs:
        head = {c.name.lower(): c.name for c in heads[ref.binding]}
        matched: dict[str, str] = {}
        for left, right in pairs:
            for mine, theirs in ((left, right), (right, left)):
                if mine.table.lower() == ref.alias.lower() and theirs.table.lower() == base_alias \
                        and mine.name.lower() in head:
                    matched[theirs.name.lower()] = head[mine.name.lower()]
        if all(c.lower() in matched for c in columns):
            joins.append(RefJoin(ref.binding, tuple(matched[c.lower()] for c in columns)))
    return tuple(joins)


def _source_tables(select: exp.Expr) -> list[exp.Table]:
    """Tables in the FROM and JOIN clauses of the top-level select."""
    tables = []
    from_ = select.args.get("from_")
    if from_ is not None and isinstance(from_.this, exp.Table):
        tables.append(from_.this)
    for join in select.args.get("joins") or []:
        if isinstance(join.this, exp.Table):
            tables.append(join.this)
    return tables


def _output_exprs(query: exp.Query) -> list[exp.Expr]:
    select = query if isinstance(query, exp.Select) else query.find(exp.Select)
    return [e.unalias().copy() for e in select.expressions] if select else []


def _output_names(query: exp.Selectable) -> list[str]:
    return [e.alias_or_name or e.sql("rasql") for e in query.selects]


def _values_names(values: exp.Values) -> list[str]:
    """`VALUES (...) AS t(a, b)` names its columns; bare VALUES gets Spark's col1, col2, ..."""
    alias = values.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return [c.name for c in alias.columns]
    first = values.expressions[0] if values.expressions else None
    width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
    return [f"col{i}" for i in range(1, width + 1)]


def _star_source(e: exp.Expr) -> str | None:
    """'' for `*`, the qualifier for `t.*`, None for any other select expression."""
    if isinstance(e, exp.Star):
        return ""
    if isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
        return e.table.lower()
    return None
