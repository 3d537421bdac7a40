"""Seeded random functions in a recursive term, re-seeded per iteration as Spark does.

Why: Spark 4.3's recursive CTE loop (`org.apache.spark.sql.execution.UnionLoopExec.doExecute`)
re-plans the recursive term at every level, and from the second recursive step on, when the term
is nondeterministic, it rewrites every `ExpressionWithRandomSeed` in it, subqueries included
(`transformAllExpressionsWithSubqueries`), with `withShiftedSeed(currentLevel - 1)`: the seed
plus the number of steps before this one (64-bit, wrapping). So `rand(7)` draws with seed 7 in
the first recursive step, 8 in the second, 9 in the third. recsql runs each iteration as a new
Spark query over the previous step's rows, so without this rewrite every step repeats the first
step's values. The anchor (recsql's base branches, iteration 0) is never shifted.

Spark's `ExpressionWithRandomSeed` expressions are `Rand` (`rand`, `random`), `Randn`,
`Uniform`, `RandStr`, `Uuid` and `Shuffle`. An unseeded call draws a fresh seed every time
anyway, and a NULL seed stays NULL when shifted (and means "unseeded" to `uuid`/`shuffle`), so
both are left as written.

The planner marks the branches that call one (`Branch.seeded`); the executor runs a recursive one
as `Branch.select_at(iteration, args)` gives it, which shifts its seeds here. The functions whose
value is not a function of the row at all, seeded or not, are listed here too
(`NON_DETERMINISTIC`).
"""

from __future__ import annotations

from sqlglot import exp

# The sqlglot node of each seeded function and the argument that holds its seed.
_SEED_ARGS: dict[type[exp.Expr], tuple[str, ...]] = {
    exp.Rand: ("this",),
    exp.Randn: ("this",),
    exp.Uniform: ("gen", "seed"),
    exp.Randstr: ("generator",),
}
# Spark functions sqlglot keeps as Anonymous (see recsql/parser/dialect.py), with the position of
# the seed among their arguments. Spark accepts only an integer literal as their seed.
_ANONYMOUS_SEED_AT = {"UUID": 0, "SHUFFLE": 1}

_LONG = 1 << 64

# functions whose value is not a function of the row they read (nor of the statement's
# arguments): a refresh from what changed would mix values drawn at two times, and a base step
# over one row per key would draw fewer values than over every row
NON_DETERMINISTIC = {"rand", "randn", "random", "uuid", "shuffle", "current_timestamp", "now",
                     "current_date", "curdate", "localtimestamp", "unix_timestamp",
                     "monotonically_increasing_id", "spark_partition_id", "input_file_name",
                     "current_user", "user", "session_user", "try_reflect", "reflect"}


def non_deterministic(node: exp.Expr) -> str | None:
    """The first function `node` calls of `NON_DETERMINISTIC`, by its lower-case name, if any."""
    for func in node.find_all(exp.Func):
        name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
        if name in NON_DETERMINISTIC:
            return name
    return None


def _seed_slots(select: exp.Expr) -> list[tuple[exp.Expr, bool]]:
    """(seed expression, literal_only) for every seeded random function in `select`."""
    slots = []
    for node in select.find_all(exp.Func):
        for arg in _SEED_ARGS.get(type(node), ()):
            if node.args.get(arg) is not None:
                slots.append((node.args[arg], False))
                break
        if isinstance(node, exp.Anonymous):
            at = _ANONYMOUS_SEED_AT.get(str(node.this).upper())
            if at is not None and len(node.expressions) > at:
                slots.append((node.expressions[at], True))
    return slots


def is_seeded(select: exp.Expr) -> bool:
    """Whether `select` calls a random function with a seed."""
    return bool(_seed_slots(select))


def shift_seeds(select: exp.Expr, iteration: int, args: dict | None = None) -> exp.Expr:
    """`select` as Spark runs it at recursive `iteration` (1 = the first recursive step): each
    seed plus `iteration - 1`. Returns `select` itself when nothing changes, else a copy.
    `args`: the statement's `:name` parameters, so a seed given as a marker shifts too."""
    shift = iteration - 1
    if shift <= 0 or not is_seeded(select):
        return select
    select = select.copy()
    for seed, literal_only in _seed_slots(select):
        value = _integer(seed, args or {})
        if value is not None:
            seed.replace(exp.Literal.number(_wrap(value + shift)))
        elif not literal_only and not isinstance(seed, exp.Null):
            # a foldable expression (Spark requires one): Spark adds the shift as a BIGINT
            seed.replace(exp.Add(this=exp.Cast(this=seed.copy(), to=exp.DataType.build("BIGINT")),
                                 expression=exp.Literal.number(shift)))
    return select


def _integer(seed: exp.Expr, args: dict) -> int | None:
    """The value of an integer literal seed (`7`, `-7`, `7L`, a bound `:name`), else None."""
    negative = False
    while True:
        if isinstance(seed, exp.Paren):
            seed = seed.this
        elif isinstance(seed, exp.Neg):
            negative, seed = not negative, seed.this
        elif isinstance(seed, (exp.Cast, exp.TryCast)) and seed.to.this in (
                exp.DataType.Type.BIGINT, exp.DataType.Type.INT):
            seed = seed.this  # `7L` reads as CAST(7 AS BIGINT)
        else:
            break
    if isinstance(seed, exp.Placeholder):
        value = args.get(seed.name)
        if isinstance(value, int) and not isinstance(value, bool):
            return -value if negative else value
        return None
    if isinstance(seed, exp.Literal) and not seed.is_string and seed.this.isdigit():
        return -int(seed.this) if negative else int(seed.this)
    return None


def _wrap(value: int) -> int:
    """Two's complement 64-bit, as Scala's Long addition wraps."""
    value %= _LONG
    return value - _LONG if value >= _LONG // 2 else value
