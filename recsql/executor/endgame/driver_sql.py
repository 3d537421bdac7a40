"""Which recursive branches the driver (DuckDB) may evaluate: an allowlist, not a denylist.

The endgame must answer exactly as the Spark loop does, or not run. DuckDB and Spark agree on
some SQL and disagree on much (division by zero gives NULL in DuckDB and an error in Spark under
ANSI; number-to-string formats, string positions, decimal precision rules, implicit casts). So a
branch goes to the driver only if every node of it is a form listed here, and the operand types
of its arithmetic, comparisons, CASE results and casts are ones whose semantics were checked
equal by tests/executor/test_differential.py. Anything else stays on Spark.

Where the engines differ on errors only (integer overflow: Spark raises under ANSI and wraps
without it; DuckDB always raises) the difference is harmless: a DuckDB error hands the iteration
back to Spark, which then gives its own answer or its own error. That holds only where DuckDB
evaluates an expression on every row Spark does: so its optimizer may not rewrite or fold
arithmetic (endgame/driver.py), and a filter (WHERE, ON) holds no arithmetic or cast, since
DuckDB orders a filter's conjuncts its own way (`(i + 1) > 0 AND k < 2` tests `k < 2` first, so
the row whose `i + 1` overflows in Spark never reaches the sum).

A constant recsql spelled for a value Spark computed (a loop-invariant subquery's,
`spark_types.constant`) is one node to the allowlist, whatever it is written with: it holds no
operation on a row, cannot raise, and DuckDB reads it as the same value of the same type, for the
types listed in `_CONSTANT_TYPES`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator

from sqlglot import exp

from recsql.executor.analysis.spark_types import family_of_name, is_constant

# Node types a translatable branch may contain (exact types: a subclass is a different form).
ALLOWED_NODES: frozenset[type[exp.Expression]] = frozenset({
    exp.Select, exp.From, exp.Join, exp.Where, exp.Table, exp.TableAlias, exp.Alias,
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Placeholder,
    exp.Neg, exp.Add, exp.Sub, exp.Mul,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In,
    exp.And, exp.Or, exp.Not, exp.Is,
    exp.Case, exp.If, exp.Cast, exp.TryCast, exp.DataType,
    # string functions, spelled in DuckDB with Spark's meaning by endgame/strings.py
    exp.DPipe, exp.Concat, exp.Length, exp.Substring, exp.Chr, exp.Ascii, exp.Upper, exp.Lower,
    exp.Subquery,  # a FROM-less derived table of constants only (`_constant_row`)
})

# DuckDB type names by family (Arrow brings Spark's INT as INTEGER, LONG as BIGINT, ...).
_EXACT_ARITHMETIC = {"INTEGER", "BIGINT", "DOUBLE"}  # same result types, IEEE doubles, and an
# integer overflow raises in DuckDB (the iteration then goes back to Spark)
_CAST_TARGETS = {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT,
                 exp.DataType.Type.TINYINT, exp.DataType.Type.DOUBLE}
# The types of the constants recsql spells (`spark_types.constant`) that DuckDB reads exactly as
# Spark does: the same integer, the same IEEE value (both parse a string correctly rounded), the
# same decimal digits, the same proleptic Gregorian date. Not a TIMESTAMP (the driver mirrors no
# time zone). A string or a boolean is a bare literal.
_CONSTANT_TYPES = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
                   exp.DataType.Type.BIGINT, exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE,
                   exp.DataType.Type.DECIMAL, exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT,
                   exp.DataType.Type.BOOLEAN, exp.DataType.Type.DATE}


class Untranslatable(Exception):
    """A branch the driver cannot evaluate exactly like Spark: it stays on Spark."""


def strict_casts(select: exp.Expr) -> None:
    """sqlglot reads Spark's CAST as TRY_CAST (NULL on failure, Spark's non-ANSI meaning). The
    driver casts strictly: a failing cast raises in DuckDB and hands the iteration back to
    Spark, which then applies its own cast semantics (an error under ANSI, NULL without)."""
    for node in list(select.find_all(exp.TryCast)):
        node.replace(exp.Cast(this=node.this, to=node.to))


def check_forms(select: exp.Expr, references: Collection[str]) -> None:
    """Every node of the branch is an allowed form (no DuckDB needed: decided before any data
    moves to the driver). `references`: the names of the tables that are the branch's
    references to its recursive group."""
    if not isinstance(select, exp.Select):
        raise Untranslatable(f"a {type(select).__name__} branch")
    _check_joins(select, references)
    for node in select.walk(prune=is_constant):
        if is_constant(node):
            _check_constant(node)
            continue
        if type(node) not in ALLOWED_NODES:
            raise Untranslatable(f"{type(node).__name__} `{node.sql('rasql')[:60]}`")
        if isinstance(node, exp.Subquery) and not _constant_row(node):
            raise Untranslatable(f"derived table `{node.sql('rasql')[:60]}`")
        if isinstance(node, exp.Cast) and node.to.this not in _CAST_TARGETS:
            raise Untranslatable(f"CAST to {node.to.sql('rasql')}")
        if isinstance(node, exp.Literal) and not node.is_string and not plain_number(node.this):
            raise Untranslatable(f"number literal {node.this}")
    for condition in _filters(select):
        for node in condition.walk(prune=is_constant):
            if isinstance(node, _MAY_RAISE) and not _negative_literal(node) and not is_constant(node):
                raise Untranslatable(f"{type(node).__name__} in a filter `{condition.sql('rasql')[:60]}`")


# Join kinds by (side, kind) as sqlglot reads Spark's: the inner ones, and those that keep or
# filter the rows of their left side (Spark's SEMI and ANTI are LEFT SEMI and LEFT ANTI). DuckDB
# means what Spark means by each (NULL keys never match; SEMI keeps a left row once, ANTI keeps
# a left row with no match, a NULL key's included), as tests/executor/test_differential.py
# checks; sqlglot spells LEFT SEMI / LEFT ANTI as DuckDB's SEMI / ANTI.
_INNER = {("", ""), ("", "INNER"), ("", "CROSS")}
_LEFT = {("LEFT", ""), ("LEFT", "OUTER"), ("LEFT", "SEMI"), ("LEFT", "ANTI"), ("", "SEMI"), ("", "ANTI")}
_RIGHT = {("RIGHT", ""), ("RIGHT", "OUTER")}


def _check_joins(select: exp.Select, references: Collection[str]) -> None:
    """Inner joins, and outer, semi and anti joins whose other side (the one the join pads with
    NULLs or filters by) reads no recursive reference: the forms the Spark loop evaluates per
    semi-naive variant as a monotone function of the references. Outer, semi and anti joins
    with an ON condition, no USING and no NATURAL (whose columns the engines name apart)."""
    def reads_group(node: exp.Expr) -> bool:
        return any(t.name in references for t in node.find_all(exp.Table))

    before: list[exp.Expr] = [select.args["from_"]] if select.args.get("from_") else []
    for join in select.args.get("joins") or []:
        shape = ((join.side or "").upper(), (join.kind or "").upper())
        if shape not in _INNER:
            if shape not in _LEFT | _RIGHT:
                raise Untranslatable(f"a {' '.join(filter(None, shape))} join")
            if join.args.get("on") is None or join.args.get("using") or join.method:
                raise Untranslatable(f"join `{join.sql('rasql')[:60]}`")
            # the side a LEFT join pads or filters by is the joined relation; a RIGHT join's
            # is everything joined before it
            padded = [join.this] if shape in _LEFT else before
            if any(reads_group(side) for side in padded):
                raise Untranslatable(f"a recursive reference on the side `{join.sql('rasql')[:60]}` pads or filters by")
        before.append(join)


def _check_constant(node: exp.Expr) -> None:
    if isinstance(node, exp.Cast) and node.to.this not in _CONSTANT_TYPES:
        raise Untranslatable(f"a constant of type {node.to.sql('rasql')}")


def _constant_row(subquery: exp.Subquery) -> bool:
    """A derived table that is one row of constants, `(SELECT 0 AS data) AS t`: a SELECT of no
    relation and no column (DuckDB would read a column of the enclosing query as a lateral
    reference; Spark refuses it)."""
    body = subquery.this
    return (isinstance(body, exp.Select) and isinstance(subquery.parent, (exp.From, exp.Join))
            and all(not value for key, value in body.args.items() if key != "expressions")
            and body.find(exp.Column) is None)


# The allowed forms that can raise in Spark (an overflow, a failing cast)
_MAY_RAISE = (exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Cast, exp.TryCast)


def _negative_literal(node: exp.Expr) -> bool:
    """`-1`: a negated number literal, which raises in neither engine (a literal beyond INT's
    range is a BIGINT or DECIMAL literal in both)."""
    return isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)


def _filters(select: exp.Select) -> Iterator[exp.Expr]:
    """The branch's WHERE condition and its joins' ON conditions."""
    where = select.args.get("where")
    if where is not None:
        yield where.this
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None:
            yield join.args["on"]


def plain_number(text: str) -> bool:
    """An integer (INT or BIGINT in both engines) or a plain decimal literal (`1.5` is
    DECIMAL(2, 1) in both); exponent forms type differently."""
    whole, _, fraction = text.partition(".")
    return whole.isdigit() and (fraction == "" or fraction.isdigit())


def typed_operands(select: exp.Select) -> Iterator[tuple[str, list[exp.Expr]]]:
    """(rule, operands) for each node whose meaning depends on its operands' types (a constant
    recsql spelled is an operand, never a cast)."""
    for node in select.walk(prune=is_constant):
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            yield "arithmetic", [node.left, node.right]
        elif isinstance(node, exp.Neg):
            yield "arithmetic", [node.this]
        elif isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
            yield "comparable", [node.left, node.right]
        elif isinstance(node, exp.Between):
            yield "comparable", [node.this, node.args["low"], node.args["high"]]
        elif isinstance(node, exp.In):
            yield "comparable", [node.this, *node.expressions]
        elif isinstance(node, exp.Case):
            results = [i.args["true"] for i in node.args.get("ifs", [])]
            yield "comparable", [*results, *([node.args["default"]] if node.args.get("default")
                                            else [])]
        elif isinstance(node, exp.If):
            yield "comparable", [node.args["true"], *([node.args["false"]]
                                                     if node.args.get("false") else [])]
        elif isinstance(node, exp.Cast) and not is_constant(node):
            yield "cast", [node.this]


def check_types(select: exp.Select, types_of: Callable[[list[exp.Expr]], list[str]],
                more: Iterable[tuple[str, list[exp.Expr]]] = ()) -> None:
    """The operand types of every typed node, and of `more` (rule, operands), are ones both
    engines treat alike.

    `types_of(expressions)` gives DuckDB's type names of expressions evaluated in the branch's
    FROM/WHERE scope (one probe, no rows read)."""
    checks = [*typed_operands(select), *more]
    if not checks:
        return
    types = iter(types_of([operand for _, operands in checks for operand in operands]))
    for rule, operands in checks:
        names = [next(types).upper() for _ in operands]
        _RULES[rule](names)


def _arithmetic(names: list[str]) -> None:
    if all(n in _EXACT_ARITHMETIC for n in names):
        return
    if "DOUBLE" in names and all(family_of_name(n) == "number" for n in names):
        return  # with a DOUBLE operand both engines compute in DOUBLE
    # Decimal arithmetic is exact in both engines while the result fits 38 digits without
    # Spark's precision-loss rounding (INT and BIGINT take part as DECIMAL(10, 0) / (20, 0))
    digits = [_decimal_digits(n) for n in names]
    if None in digits or sum(d for d in digits if d) + 1 > 38:
        raise Untranslatable(f"arithmetic on {', '.join(names)}")


def _decimal_digits(name: str) -> int | None:
    if name.startswith("DECIMAL("):
        return int(name[len("DECIMAL("):].split(",")[0])
    return {"INTEGER": 10, "BIGINT": 20}.get(name)


def _comparable(names: list[str]) -> None:
    families = {family_of_name(n) for n in names} - {"null"}
    if None in families or len(families) > 1:
        raise Untranslatable(f"comparing or combining {', '.join(names)}")
    # A FLOAT met with a DECIMAL or an integer: Spark widens both to DOUBLE, DuckDB to FLOAT
    # (a FLOAT column holding 0.1 equals the literal 0.1 in DuckDB only); with a DOUBLE both
    # widen to DOUBLE
    if "FLOAT" in names and any(n not in ("FLOAT", "DOUBLE") and family_of_name(n) == "number" for n in names):
        raise Untranslatable(f"comparing or combining {', '.join(names)}")


def _cast(names: list[str]) -> None:
    if any(family_of_name(n) != "number" for n in names):
        raise Untranslatable(f"CAST from {', '.join(names)}")


def _only(kinds: set[str], what: str) -> Callable[[list[str]], None]:
    """A rule that admits operands of the DuckDB types `kinds` (and untyped NULLs) only."""
    def rule(names: list[str]) -> None:
        if any(n not in kinds and family_of_name(n) != "null" for n in names):
            raise Untranslatable(f"{what} of {', '.join(names)}")
    return rule


_RULES: dict[str, Callable[[list[str]], None]] = {
    "arithmetic": _arithmetic, "comparable": _comparable, "cast": _cast,
    # Spark's string functions on strings alone: on a number or a binary value they cast it to
    # a string (formats differ) or mean something else (`||` of arrays)
    "text": _only({"VARCHAR"}, "a string function"),
    # SUBSTR's position and length are Spark INTs, CHR's code a BIGINT (of an integer alone:
    # Spark would cast a fractional one first)
    "position": _only({"TINYINT", "SMALLINT", "INTEGER"}, "a SUBSTR position or length"),
    "code": _only({"TINYINT", "SMALLINT", "INTEGER", "BIGINT"}, "CHR"),
}
