"""Candidates that cannot change a min()/max() CTE: the key bound (`model.KeyBound`).

CC's `cc(X, min() AS C)` starts from `SELECT Src, Src FROM edge`: every vertex `a` that is a
`Src` holds `C <= a` from the base step on, since min() only falls. Its recursive branch
`SELECT edge.Dst, cc.C FROM cc, edge WHERE cc.X = edge.Src` makes a candidate `(Dst, C)` per
edge; one with `C >= Dst`, where `Dst` is itself a `Src`, can change nothing, and the executor
drops it before the candidates' partial aggregate (GraphX's CC sends a message only along an
edge whose source's label is below its destination's). In CC's first iteration that is half the
candidates (a label is its vertex). Whether every `Dst` is a `Src` is a fact of the data, which
the executor learns from the first iteration of a statement that runs unfiltered: where a
recursive branch makes one candidate per row of the copy (`KeyBound.witnesses`: no condition but
the join), that iteration's groups are every `Src` and every `Dst`, so it adds no group exactly
when the fact holds (`executor/strategies/keybound.py`).
"""

from __future__ import annotations

from sqlglot import exp

from recsql.planner import aggregates
from recsql.planner.model import BaseRelation, Branch, CTEPlan, KeyBound


def key_bound(cte: CTEPlan) -> KeyBound | None:
    """The key bound of `cte` (planned, with its base branches bound to partitioned copies), or
    None: a head of one group key and one min()/max() column (not declared, no payload); one
    base branch `SELECT t.a, t.a FROM t` (no WHERE: every value of `a` makes a group) that reads
    the distinct keys `a` of the copy of `t` partitioned by `a`; and the recursive branches whose
    group key is a column of that same copy, qualified (the others are left as they are)."""
    if aggregates.kind(cte) is not aggregates.Kind.EXTREMA or len(cte.head) != 2:
        return None
    keys, values = cte.group_key, cte.aggregates
    if len(keys) != 1 or len(values) != 1 or values[0].declared is not None \
            or values[0].agg not in ("min", "max"):
        return None
    if len(cte.base_branches) != 1:
        return None
    base = _identity_base(cte.base_branches[0])
    if base is None:
        return None
    position = [c.name for c in cte.head].index(keys[0])
    sources, witnesses = [], []
    for branch in cte.recursive_branches:
        source = _key_source(branch, base, position)
        if source is not None:
            sources.append((branch.index, source))
            if _one_candidate_per_row(branch, cte, base):
                witnesses.append(branch.index)
    if not sources:
        return None
    return KeyBound(base=base.key, column=base.columns[0], extremum=values[0].agg,
                    sources=tuple(sources), witnesses=tuple(witnesses))


def _identity_base(branch: Branch) -> BaseRelation | None:
    """The copy a base branch `SELECT a, a FROM t` reads the keys `a` of (no other clause)."""
    select = branch.select
    if len(branch.bases) != 1 or not branch.bases[0].keys_only or len(branch.bases[0].columns) != 1:
        return None
    base = branch.bases[0]
    if not isinstance(select, exp.Select) or any(
            v for k, v in select.args.items() if k not in ("expressions", "from_")):
        return None
    items = [e.unalias() for e in select.expressions]
    if len(items) != 2 or not all(isinstance(e, exp.Column) and not e.args.get("db") for e in items):
        return None
    if not all(e.name.lower() == base.columns[0].lower() for e in items):
        return None
    return base


def _key_source(branch: Branch, base: BaseRelation, position: int) -> str | None:
    """The column of `base`'s copy that a recursive branch's output at the group key's position
    reads, as a qualified column of its one base table (that same copy), if it is one."""
    select = branch.select
    if len(branch.bases) != 1 or branch.bases[0].key != base.key or not isinstance(select, exp.Select):
        return None
    if position >= len(select.expressions):
        return None
    item = select.expressions[position].unalias()
    tables = [t for t in select.find_all(exp.Table)
              if isinstance(t.this, exp.Placeholder) and t.this.name == branch.bases[0].binding]
    if len(tables) != 1 or not isinstance(item, exp.Column) or item.args.get("db"):
        return None
    if item.table.lower() != tables[0].alias_or_name.lower():
        return None
    return item.name


# clauses that could drop or merge a branch's rows (a DISTINCT merges rows, never their keys,
# but is left out with the rest: a witness is the plain join)
_CLAUSES = ("distinct", "group", "having", "qualify", "windows", "order", "limit", "offset", "laterals",
            "pivots", "with_")


def _one_candidate_per_row(branch: Branch, cte: CTEPlan, base: BaseRelation) -> bool:
    """Whether `branch`, in the first iteration after the base step, makes a candidate for every
    row of `base`'s copy whose key is not NULL: it reads its own CTE's delta (then every group
    `(a, a)` of the base step, both columns holding every key `a`) and the copy, joined on the
    copy's key column and nothing else: no WHERE or ON condition besides that one equality, no
    other relation, no clause that drops rows."""
    select = branch.select
    if len(branch.refs) != 1 or branch.refs[0].cte != cte.key or len(branch.bases) != 1:
        return False
    ref, copy = branch.refs[0], branch.bases[0]
    if copy.key != base.key or copy.join_of(ref.binding) is None or not isinstance(select, exp.Select):
        return False
    if any(select.args.get(k) for k in _CLAUSES) or select.find(exp.Subquery, exp.Exists, exp.Lateral):
        return False
    from_, joins = select.args.get("from_"), select.args.get("joins") or []
    tables = [from_.this if from_ else None, *[j.this for j in joins]]
    if len(tables) != 2 or not all(isinstance(t, exp.Table) and isinstance(t.this, exp.Placeholder)
                                   for t in tables):
        return False
    names = {t.this.name: t.alias_or_name.lower() for t in tables}
    if set(names) != {ref.binding, copy.binding}:
        return False
    if any(j.side or (j.kind or "INNER").upper() not in {"INNER", "CROSS"} or j.args.get("using")
           for j in joins):
        return False
    where = select.args.get("where")
    conditions = [*([where.this] if where else []), *[j.args["on"] for j in joins if j.args.get("on")]]
    parts = [p for c in conditions for p in (c.unnest().flatten() if isinstance(c.unnest(), exp.And) else [c])]
    if len(parts) != 1 or not isinstance(parts[0], exp.EQ):
        return False
    sides = [parts[0].this.unnest(), parts[0].expression.unnest()]
    if not all(isinstance(c, exp.Column) and not c.args.get("db") for c in sides):
        return False
    qualified = {(c.table.lower(), c.name.lower()) for c in sides}
    return (names[copy.binding], copy.columns[0].lower()) in qualified and \
        any(t == names[ref.binding] for t, _ in qualified)
