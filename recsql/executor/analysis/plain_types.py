"""A plain branch's output types read off its relations' schemas, without a Spark analysis.

Typing runs for every statement (and for CREATE VIEW before anything runs), and each branch it
asks Spark about costs an analysis (10-16 ms warm). A branch that only selects columns of
relations whose schemas recsql already holds, filtered and joined on simple comparisons, has as
its output types exactly those columns' types: a projection of attribute references, an inner
join and a filter never change a column's type. So such a branch is typed here, and any other
branch by Spark (`schemas._typed_branch`).

Why this is exact, and never accepts a branch Spark refuses:
- Spark types the rendered branch text (`render(branch.select)`); this reads the same AST. Its
  nodes are limited to `PLAIN_NODES` (a subset of the driver's allowlist, `driver_sql`): no
  function, cast, subquery, aggregate, window, set operation, DISTINCT, ORDER, LIMIT; no
  arithmetic but a select item's `+` and `-` of INT and BIGINT columns and INT literals;
  only inner and cross joins, without USING or NATURAL; every relation a bound placeholder with
  an alias and no column list, whose schema the caller knows (a base table's `spark.table`
  frame, analysed when the statement was planned; a reference's types found so far).
- A select item is a column, optionally aliased, so its type is the column's type. CHAR and
  VARCHAR columns (Spark pads or checks them on read) are declined.
- Every column resolves as Spark resolves it (`AttributeSeq.resolve`): `q.c` to the one column
  `c` of the relation aliased `q`; `c` to the one column named `c` across the relations in
  scope (all of them for the select list and WHERE; those up to and including the join for an
  ON, as the rendered joins are left-deep). Names compare as `spark.sql.caseSensitive` says;
  it is read only if the two settings resolve a column differently. Python's `lower` is
  taken as Spark's case folding (Java's `toLowerCase` and `equalsIgnoreCase`) only between
  ASCII names; a non-ASCII name compared with any name it does not equal exactly declines. A name that matches no
  column or several, or has more parts, is declined: Spark would then try a nested field, a
  metadata column, a lateral alias or a session variable, or report the error itself.
- Every condition is boolean-typed (a comparison, IN, BETWEEN, IS [NOT] NULL, AND/OR/NOT of
  those, TRUE/FALSE, a BOOLEAN column), and every comparison's operands are columns or plain
  literals of one family Spark compares without an analysis error: numbers (integral,
  fractional and decimal together), UTF8_BINARY strings, booleans, or dates, with NULL
  literals among them. Anything else (a map, a struct, a string against a number, a collated
  string) is declined, and Spark's analysis reports its error exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pyspark.sql.types import (
    BooleanType,
    CharType,
    DataType,
    IntegerType,
    LongType,
    StructField,
    StructType,
    VarcharType,
)
from sqlglot import exp

from recsql.executor.analysis.spark_types import family
from recsql.executor.endgame.driver_sql import ALLOWED_NODES, plain_number

PLAIN_NODES: frozenset[type[exp.Expression]] = ALLOWED_NODES - {
    exp.Mul, exp.Case, exp.If, exp.Cast, exp.TryCast, exp.DataType,
}
_SELECT_ARGS = {"expressions", "from_", "joins", "where"}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"  # Spark's metadata key on CHAR(n)/VARCHAR(n) columns


class _Declined(Exception):
    """The branch is not plain: Spark types it."""


Relation = tuple[str, StructType]  # alias, schema
Found = tuple[int, int]  # relation index, field index


def plain_types(select: exp.Expr, schema_of: Callable[[exp.Table], StructType | None],
                case_sensitive: Callable[[], bool]) -> list[DataType] | None:
    """The output types Spark's analysis gives `select`, or None where it is not plain.

    `schema_of(table)` is a relation's schema, or None if unknown; `case_sensitive()` reads
    `spark.sql.caseSensitive`, called only where it decides a name."""
    if not isinstance(select, exp.Select) or type(select) is not exp.Select:
        return None
    if not select.args.get("from_"):
        return _constant_types(select)
    try:
        relations, scopes = _relations(select, schema_of)
        uses = list(_uses(select, scopes, len(relations)))
        found = _resolve_all(uses, relations, case_sensitive)
        types = _ItemTypes(relations, found)
        result = [types.of(item.this if isinstance(item, exp.Alias) else item)
                  for item in select.expressions]
        for condition, _ in scopes:
            _check_condition(condition, types)
        return result
    except _Declined:
        return None


def _constant_types(select: exp.Select) -> list[DataType] | None:
    """A SELECT of integer literals and nothing else (an anchor such as `SELECT 1, 0`): INT
    each, as Spark types an integer literal within INT's range (`-n` is INT read either as a
    negative literal or as the negation of `n`, while n stays below 2^31 - 1). Anything else,
    BIGINT-sized literals included, is declined."""
    if any(value for key, value in select.args.items() if key != "expressions") or not select.expressions:
        return None
    types: list[DataType] = []
    for item in select.expressions:
        if type(item) is exp.Alias:
            if set(k for k, v in item.args.items() if v) != {"this", "alias"}:
                return None
            item = item.this
        if type(item) is exp.Neg:
            item = item.this
        if type(item) is not exp.Literal or item.is_string or not item.this.isdigit() \
                or not item.this.isascii() or int(item.this) >= 2**31 - 1:
            return None
        types.append(IntegerType())
    return types


def _relations(select: exp.Select, schema_of: Callable[[exp.Table], StructType | None]
               ) -> tuple[list[Relation], list[tuple[exp.Expr, int]]]:
    """The relations in FROM/JOIN order, and each condition with how many of them it sees."""
    if any(value for key, value in select.args.items() if key not in _SELECT_ARGS):
        raise _Declined
    if not select.expressions or any(type(n) not in PLAIN_NODES for n in select.walk()):
        raise _Declined
    source = select.args.get("from_")
    if source is None or set(k for k, v in source.args.items() if v) != {"this"}:
        raise _Declined
    relations = [_relation(source.this, schema_of)]
    scopes: list[tuple[exp.Expr, int]] = []
    for join in select.args.get("joins") or []:
        if any(v for k, v in join.args.items() if k not in {"this", "on", "kind"}):
            raise _Declined  # a side (outer join), USING, NATURAL, a hint, ...
        if (join.args.get("kind") or "").upper() not in {"", "INNER", "CROSS"}:
            raise _Declined
        relations.append(_relation(join.this, schema_of))
        if join.args.get("on") is not None:
            scopes.append((join.args["on"], len(relations)))
    where = select.args.get("where")
    if where is not None:
        scopes.append((where.this, len(relations)))
    return relations, scopes


def _relation(table: exp.Expr, schema_of: Callable[[exp.Table], StructType | None]) -> Relation:
    if type(table) is not exp.Table or set(k for k, v in table.args.items() if v) != {"this", "alias"}:
        raise _Declined
    alias = table.args["alias"]
    if type(table.this) is not exp.Placeholder or set(k for k, v in alias.args.items() if v) != {"this"}:
        raise _Declined  # a column list (`AS t(a, b)`) renames the columns
    schema = schema_of(table)
    if schema is None:
        raise _Declined
    return alias.name, schema


def _uses(select: exp.Select, scopes: list[tuple[exp.Expr, int]], everything: int
          ) -> Iterator[tuple[exp.Column, int]]:
    """Every column of the branch, with how many relations (from the first) it may name."""
    for item in select.expressions:
        yield from ((c, everything) for c in item.find_all(exp.Column))
    for condition, seen in scopes:
        yield from ((c, seen) for c in condition.find_all(exp.Column))


def _resolve_all(uses: list[tuple[exp.Column, int]], relations: list[Relation],
                 case_sensitive: Callable[[], bool]) -> dict[int, Found | None]:
    """Each column (by `id`) resolved; the conf read only if the two settings disagree."""
    by_setting = {
        sensitive: {id(column): _resolve(column, relations[:seen], sensitive) for column, seen in uses}
        for sensitive in (False, True)
    }
    chosen = by_setting[False] if by_setting[False] == by_setting[True] else by_setting[case_sensitive()]
    if any(found is None for found in chosen.values()):
        raise _Declined
    return chosen


def _resolve(column: exp.Column, relations: list[Relation], sensitive: bool) -> Found | None:
    """The one column `column` names among `relations`, or None (none, or several)."""
    if type(column.this) is not exp.Identifier or column.args.get("db") or column.args.get("catalog"):
        return None

    def same(a: str, b: str) -> bool:
        if sensitive or a == b:
            return a == b
        if a.isascii() and b.isascii():
            return a.lower() == b.lower()
        raise _Declined  # beyond ASCII, Java's case folding is not Python's

    qualifier = column.args.get("table")
    matches = [
        (r, f)
        for r, (alias, schema) in enumerate(relations)
        if qualifier is None or same(qualifier.name, alias)
        for f, field in enumerate(schema.fields)
        if same(field.name, column.name)
    ]
    return matches[0] if len(matches) == 1 else None


class _ItemTypes:
    """Types of a branch's plain operands: resolved columns and literals."""

    def __init__(self, relations: list[Relation], found: dict[int, Found | None]) -> None:
        self.relations = relations
        self.found = found

    def field(self, column: exp.Column) -> StructField:
        found = self.found[id(column)]
        assert found is not None  # `_resolve_all` declined the branch otherwise
        r, f = found
        field = self.relations[r][1].fields[f]
        if isinstance(field.dataType, (CharType, VarcharType)) or _CHAR_VARCHAR in (field.metadata or {}):
            raise _Declined  # read with padding or a length check
        return field

    def of(self, node: exp.Expr) -> DataType:
        if type(node) in (exp.Add, exp.Sub):
            return self.integral_sum(node)
        if type(node) is not exp.Column:
            raise _Declined
        return self.field(node).dataType

    def integral_sum(self, node: exp.Expr) -> DataType:
        """The type of a sum or difference of INT and BIGINT columns and INT literals, with at
        least one column (`p.cost + e.cost`, `p.depth + 1`): BIGINT if any column is, else INT,
        as Spark widens them (with ANSI on or off; an overflow is the run's, not the type's)."""
        types: list[DataType] = []

        def walk(n: exp.Expr) -> None:
            if isinstance(n, (exp.Add, exp.Sub)) and type(n) in (exp.Add, exp.Sub):
                walk(n.left)
                walk(n.right)
            elif type(n) is exp.Paren:
                walk(n.this)
            elif type(n) is exp.Column:
                types.append(self.field(n).dataType)
            elif not (type(n) is exp.Literal and not n.is_string and n.this.isascii()
                      and n.this.isdigit() and int(n.this) < 2**31 - 1):
                raise _Declined

        walk(node)
        if not types or any(type(t) not in (IntegerType, LongType) for t in types):
            raise _Declined
        return LongType() if any(type(t) is LongType for t in types) else IntegerType()

    def family(self, node: exp.Expr) -> str:
        """The comparison family of a plain operand, or declined."""
        if isinstance(node, exp.Paren):
            return self.family(node.this)
        if isinstance(node, exp.Column):
            return _family(self.field(node).dataType)
        if isinstance(node, exp.Null):
            return "null"
        if isinstance(node, exp.Boolean):
            return "boolean"
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            node = node.this
            if node.is_string:
                raise _Declined
        if isinstance(node, exp.Literal):
            if node.is_string:
                return "string"
            if plain_number(node.this) and len(node.this) <= 30:
                return "number"
        raise _Declined


def _family(dtype: DataType) -> str:
    found = family(dtype)
    if found is None:
        raise _Declined
    return found


def _check_condition(node: exp.Expr, types: _ItemTypes) -> None:
    """`node` is boolean-typed and each of its comparisons is between one family."""
    if isinstance(node, exp.Paren):
        _check_condition(node.this, types)
    elif isinstance(node, (exp.And, exp.Or)):
        _check_condition(node.left, types)
        _check_condition(node.right, types)
    elif isinstance(node, exp.Not):
        _check_condition(node.this, types)
    elif isinstance(node, exp.Boolean):
        pass
    elif isinstance(node, exp.Column):
        if not isinstance(types.of(node), BooleanType):
            raise _Declined
    elif isinstance(node, exp.Is):
        if not isinstance(node.expression, exp.Null):
            raise _Declined  # IS TRUE, IS DISTINCT FROM ...
        if isinstance(node.this, exp.Column):
            types.field(node.this)  # IS NULL takes a column of any type
        else:
            types.family(node.this)
    elif isinstance(node, _COMPARISONS):
        _same_family([node.left, node.right], types)
    elif isinstance(node, exp.Between):
        if node.args.get("symmetric"):
            raise _Declined
        _same_family([node.this, node.args["low"], node.args["high"]], types)
    elif isinstance(node, exp.In):
        if not node.expressions or any(node.args.get(k) for k in ("query", "unnest", "field")):
            raise _Declined
        _same_family([node.this, *node.expressions], types)
    else:
        raise _Declined


def _same_family(operands: list[exp.Expr], types: _ItemTypes) -> None:
    families = {types.family(o) for o in operands} - {"null"}
    if len(families) != 1:
        raise _Declined
