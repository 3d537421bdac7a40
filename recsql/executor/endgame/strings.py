"""Spark's string functions in DuckDB's words: a branch's `||`, CONCAT, LENGTH, SUBSTR, CHR,
ASCII, UPPER and LOWER rewritten so that DuckDB answers as Spark does, or raises (which hands
the iteration back to Spark). Each meaning is checked against Spark by
tests/executor/test_differential.py.

Where the engines agree the form stays: `||` and CONCAT (NULL if any operand is NULL; DuckDB's
own CONCAT skips NULLs, so CONCAT becomes `||`), ASCII (the first code point, 0 for ''),
SUBSTR at a nonzero position with a length of at least 0 (code points, a negative position
counting from the end, and a start before the string shortening the length, as Spark's
`substringSQL`). Where they differ it is spelled out:

* LENGTH counts code points in both; Spark's is an INT, DuckDB's a BIGINT (cast);
* SUBSTR's position 0 is Spark's 1 and a negative length its 0 (DuckDB: one character fewer;
  counting backwards), and a SUBSTR without a length has Spark's, 2147483647;
* CHR(n) is '' for n < 0 and the character n % 256 otherwise in Spark (CHR(0) is U+0000);
  DuckDB's takes any code point;
* UPPER and LOWER: Spark maps by Java's (or ICU's) full case rules (`ß` -> `SS`), DuckDB by
  single characters (`ß` -> `ẞ`); on ASCII text both map A-Z and a-z alone, so other text
  raises in DuckDB.

The rewrite returns the type checks its operands must pass (`driver_sql.check_types`): strings
for the text, integers for positions and codes. An operand kept in the rewritten branch is the
node checked; its copies (an operand used twice) are made after the operand's own rewrite, as
the nodes are rewritten innermost first."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from recsql.executor.endgame.driver_sql import Untranslatable

Checks = list[tuple[str, list[exp.Expr]]]


def spark_strings(select: exp.Expr) -> Checks:
    """Rewrite the string functions of `select` in place (innermost first); their type checks."""
    checks: Checks = []
    nodes = [n for n in select.find_all(*_REWRITES, bfs=True) if type(n) in _REWRITES]
    for node in reversed(nodes):  # breadth-first, reversed: a node after all it holds
        replacement = _REWRITES[type(node)](node, checks)
        if replacement is not node:
            node.replace(replacement)
    return checks


def _pipe(node: exp.DPipe, checks: Checks) -> exp.Expr:
    for key in ("this", "expression"):
        node.set(key, _grouped(node.args[key]))
    checks.append(("text", [node.left, node.right]))
    return node


def _concat(node: exp.Concat, checks: Checks) -> exp.Expr:
    parts = list(node.expressions)
    if not parts:
        raise Untranslatable("CONCAT()")
    checks.append(("text", parts))
    joined = _grouped(parts[0])
    for part in parts[1:]:
        joined = exp.DPipe(this=joined, expression=_grouped(part))
    return joined


def _length(node: exp.Length, checks: Checks) -> exp.Expr:
    checks.append(("text", [node.this]))
    return exp.Cast(this=exp.Length(this=node.this), to=exp.DataType.build("INT"))


def _ascii(node: exp.Ascii, checks: Checks) -> exp.Expr:
    checks.append(("text", [node.this]))
    return node


def _substring(node: exp.Substring, checks: Checks) -> exp.Expr:
    start, length = node.args.get("start"), node.args.get("length")
    if start is None:
        raise Untranslatable("SUBSTR without a position")
    checks.append(("text", [node.this]))
    checks.append(("position", [start] if length is None else [start, length]))
    # position 0 is Spark's 1, a negative length its 0; without a length Spark's is INT's
    # largest, which a position near INT's smallest shortens (SUBSTR(s, -2147483648) is s
    # without its last character in Spark, all of s in DuckDB without the length)
    node.set("start", _unless(start, exp.EQ, 0, 1))
    node.set("length", exp.Literal.number(2**31 - 1) if length is None else _unless(length, exp.LT, 0, 0))
    return node


def _unless(node: exp.Expr, kind: type[exp.Binary], value: int, instead: int) -> exp.Expr:
    """`node`, but `instead` where `node <kind> value` holds."""
    literal = _integer(node)
    if literal is None:
        return _case(_compare(kind, node.copy(), value), exp.Literal.number(instead), node)
    holds = literal == value if kind is exp.EQ else literal < value
    return exp.Literal.number(instead) if holds else node


def _chr(node: exp.Chr, checks: Checks) -> exp.Expr:
    if len(node.expressions) != 1 or node.args.get("charset"):
        raise Untranslatable(f"CHR `{node.sql('rasql')[:60]}`")
    code = node.expressions[0]
    checks.append(("code", [code]))
    byte = exp.Cast(this=exp.Mod(this=_grouped(code), expression=exp.Literal.number(256)),
                    to=exp.DataType.build("INT"))
    return _case(_compare(exp.LT, code.copy(), 0), exp.Literal.string(""),
                 exp.Chr(expressions=[byte]))


def _case_mapping(node: exp.Upper | exp.Lower, checks: Checks) -> exp.Expr:
    text = node.this
    checks.append(("text", [text]))
    # bytes = code points only for ASCII text; NULL text is NULL (the ELSE)
    beyond_ascii = exp.NEQ(this=exp.Anonymous(this="strlen", expressions=[text.copy()]),
                           expression=exp.Length(this=text.copy()))
    refusal = exp.Anonymous(this="error", expressions=[exp.Literal.string(
        f"{type(node).__name__.upper()} of text beyond ASCII: Spark's case rules")])
    return _case(beyond_ascii, refusal, type(node)(this=text))


_REWRITES: dict[type[exp.Expr], Callable[..., exp.Expr]] = {
    exp.DPipe: _pipe, exp.Concat: _concat, exp.Length: _length, exp.Ascii: _ascii,
    exp.Substring: _substring, exp.Chr: _chr, exp.Upper: _case_mapping, exp.Lower: _case_mapping,
}


def _integer(node: exp.Expr) -> int | None:
    """The value of an integer literal (`-1` is a negated literal), else None."""
    if isinstance(node, exp.Neg):
        inner = _integer(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


def _grouped(node: exp.Expr) -> exp.Expr:
    """`node` in parentheses where an operator holds it (sqlglot renders the tree without them,
    and DuckDB's precedence is not Spark's: Spark's `||` binds as `+` does)."""
    operator = isinstance(node, (exp.Binary, exp.Unary)) and not isinstance(node, exp.Paren)
    return exp.Paren(this=node) if operator else node


def _compare(kind: type[exp.Binary], node: exp.Expr, value: int) -> exp.Expr:
    return kind(this=_grouped(node), expression=exp.Literal.number(value))


def _case(condition: exp.Expr, then: exp.Expr, otherwise: exp.Expr) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=condition, true=then)], default=otherwise)
