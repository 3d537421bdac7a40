"""A recursive branch as DuckDB SQL that answers exactly as Spark does, or `Untranslatable`.

The planner's branch AST is rendered for DuckDB with the relations it reads renamed to the
tables the driver loaded and its references to the group's CTEs bound per semi-naive variant.
Where the two engines differ on a form the allowlist (`driver_sql.py`) admits, the branch is
rewritten to Spark's meaning, typed by DuckDB itself (a probe binds the query, reads no rows):
Spark's integral CAST truncates, DuckDB's rounds; string functions take Spark's meaning
(`strings.py`); the output is cast to the head's Spark types;
a sum/count contributor is encoded the same way for every row the driver makes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)
from sqlglot import exp

from recsql.executor.analysis.spark_types import INTEGRAL_SQL, is_constant
from recsql.executor.endgame.driver_sql import Untranslatable, check_forms, check_types, strict_casts
from recsql.executor.endgame.strings import spark_strings
from recsql.executor.loop.protocols import Loop
from recsql.executor.state.relations import CONTRIB
from recsql.planner.model import DELTA, Branch, CTEPlan
from recsql.planner.names import TableName, is_cte_reference

_BIND = "__rq_bind_"  # a reference's table until a variant binds it
_FRACTIONAL = ("FLOAT", "DOUBLE", "REAL", "DECIMAL")  # DuckDB type names whose CAST rounds
T = exp.DataType.Type
_TYPES = (
    (ByteType, T.TINYINT), (ShortType, T.SMALLINT), (IntegerType, T.INT), (LongType, T.BIGINT),
    (FloatType, T.FLOAT), (DoubleType, T.DOUBLE), (StringType, T.VARCHAR),
    (BooleanType, T.BOOLEAN), (DateType, T.DATE),
)


@dataclass(frozen=True)
class BranchSQL:
    """A recursive branch on the driver: the candidates of each semi-naive variant, cast to the
    head's types (with the contributor column of a sum/count head), and the DuckDB types of its
    contributor expressions."""

    variants: tuple[tuple[tuple[str, ...], exp.Select], ...]  # (DELTA/ALL per ref, candidates)
    contributor_types: tuple[str, ...]


def prepare(con: Any, run: Loop, cte: CTEPlan, branch: Branch, sources: dict[tuple, exp.Table],
            names: dict[str, dict[str, str]]) -> BranchSQL:
    """The branch as DuckDB SQL: its relations renamed to the DuckDB tables they were loaded as
    (`sources`: relation key -> table), its parameters inlined, Spark's semantics spelled out,
    and each variant's references bound to the delta or the whole of the CTEs they read
    (`names`: CTE key -> role -> DuckDB table)."""
    select = branch.select.copy()
    if not isinstance(select, exp.Select):  # `applies` lets only plain SELECTs through
        raise Untranslatable(f"a {type(select).__name__} branch")
    contrib = cte.summing
    if contrib:
        for i, expr in enumerate(branch.contributor):
            select = select.select(exp.alias_(expr.copy(), f"__rq_k{i}", quoted=True), copy=False)
    for key, table in branch_relations(run.ctx.env, branch, select):
        _rename(table, sources[key], table.alias_or_name)
    for table in list(select.find_all(exp.Table)):  # references: bound per variant
        if isinstance(table.this, exp.Placeholder):
            _rename(table, exp.Table(this=exp.to_identifier(_BIND + table.this.name, quoted=True)),
                    table.alias)
    _inline_parameters(select, run.ctx.args or {})
    check_forms(select, {_BIND + r.binding for r in branch.refs})
    strict_casts(select)
    text_checks = spark_strings(select)
    whole = {r.binding: names[r.cte]["all"] for r in branch.refs}
    check_types(select, lambda exprs: probe_types(con, select, whole, exprs), text_checks)
    truncate_casts(con, select, whole)
    # Output types, with every reference bound to the whole relation.
    types = [str(t) for t in con.sql(_bind(select, whole).sql("duckdb", identify=True)).types]
    schema = run.states[cte.key].schema
    width = len(schema.fields)
    extra = len(branch.contributor) if contrib else 0
    if len(types) != width + extra:
        raise Untranslatable("branch width")
    outputs: list[exp.Expr] = []
    for i, f in enumerate(schema.fields):
        target = duck_type(f.dataType)
        value: exp.Expr = exp.column(f"c{i}", "q")
        if target.is_type(*INTEGRAL_SQL) and types[i].upper().startswith(_FRACTIONAL):
            value = _trunc(value)  # Spark's cast truncates, DuckDB's rounds
        outputs.append(exp.alias_(exp.cast(value, target), f.name))
    if contrib:
        fields: list[tuple[str, exp.Expr]] = [("b", exp.Literal.number(branch.index))]
        fields += [(f"c{i}", exp.column(f"k{i}", "q")) for i in range(extra)]
        outputs.append(exp.alias_(contributor(fields), CONTRIB))
    aliases = [f"c{i}" for i in range(width)] + [f"k{i}" for i in range(extra)]
    variants = []
    for variant in branch.variants or ((),):  # a base branch: one rule, nothing to bind
        bound = {ref.binding: names[ref.cte]["delta" if role == DELTA else "all"]
                 for ref, role in zip(branch.refs, variant)}
        body = exp.Subquery(this=_bind(select, bound), alias=exp.TableAlias(
            this=exp.to_identifier("q"), columns=[exp.to_identifier(a) for a in aliases]))
        variants.append((variant, exp.select(*outputs).from_(body)))
    return BranchSQL(tuple(variants), tuple(types[width:]))


def _inline_parameters(select: exp.Expr, args: dict) -> None:
    for marker in list(select.find_all(exp.Placeholder)):
        name = marker.name
        if name not in args:
            raise Untranslatable(f"parameter :{name}")
        value = args[name]
        # a Python float is a DOUBLE to Spark but would be a DECIMAL literal to DuckDB
        if value is not None and not isinstance(value, (bool, int, str)):
            raise Untranslatable(f"parameter :{name} of type {type(value).__name__}")
        marker.replace(exp.convert(value))


def contributor(fields: Sequence[tuple[str, exp.Expr]]) -> exp.Expr:
    """The driver's encoding of a contributor: `to_json` of a struct of the branch index `b` and
    the contributor's values `c0`, `c1`, ... (sqlglot renders the struct as DuckDB's `{'b': ...}`
    literal, the same STRUCT as `struct_pack(b := ...)`, so the same JSON text)."""
    struct = exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier(name), expression=value) for name, value in fields
    ])
    # sqlglot's exp.JSONFormat renders as CAST(TO_JSON(...) AS TEXT); DuckDB's own to_json keeps
    # the JSON type the contributor column has always had on the driver
    return exp.Anonymous(this="to_json", expressions=[struct])


def _trunc(value: exp.Expr) -> exp.Expr:
    # DuckDB's one-argument trunc(x), towards zero, as the driver has always written it
    return exp.Anonymous(this="trunc", expressions=[value])


def probe_types(con: Any, select: exp.Select, whole: dict[str, str], exprs: list) -> list[str]:
    """DuckDB's types of `exprs` in the branch's scope (binds only: no rows are read)."""
    probe = select.copy()
    probe.set("expressions", [exp.alias_(e.copy(), f"p{i}", quoted=True)
                              for i, e in enumerate(exprs)])
    for join in probe.find_all(exp.Join):  # a semi or anti join's ON reads columns its SELECT
        if (join.kind or "").upper() in ("SEMI", "ANTI"):  # cannot: typed as an inner join's
            join.set("kind", None)
            join.set("side", None)
    return [str(t) for t in con.sql(_bind(probe, whole).sql("duckdb", identify=True)).types]


def truncate_casts(con: Any, select: exp.Select, whole: dict[str, str]) -> None:
    """Spark's CAST of a fractional number to an integral type truncates, DuckDB's rounds:
    truncate first where the operand is FLOAT/DOUBLE/DECIMAL (typed by a DuckDB probe)."""
    casts = [c for c in select.find_all(exp.Cast)
             if c.to.is_type(*exp.DataType.INTEGER_TYPES) and not is_constant(c)]
    if not casts:
        return
    types = [t.upper() for t in probe_types(con, select, whole, [c.this for c in casts])]
    for cast, dtype in zip(casts, types):
        if dtype.startswith(_FRACTIONAL):
            cast.set("this", _trunc(cast.this))


def recode_contributors(con: Any, cte: CTEPlan, table: str,
                        types: dict[int, tuple[str, ...]]) -> None:
    """Spark's recursive contributors are `to_json(named_struct('b', i, 'c0', ...))`; rewrite
    them in the driver's encoding (values cast to the DuckDB types of the same expressions, by
    branch index in `types`) so that a contributor met again on the driver is recognised. Base
    contributors are only ever produced at iteration 0, so they stay as Spark wrote them."""
    column = exp.column(CONTRIB, quoted=True)
    for branch in cte.recursive_branches:
        fields: list[tuple[str, exp.Expr]] = [("b", exp.Literal.number(branch.index))] + [
            # DuckDB's own name of the type, as its probe printed it
            (f"c{i}", exp.cast(_field(column, f"c{i}"), exp.DataType(this=T.USERDEFINED, kind=t)))
            for i, t in enumerate(types[branch.index])
        ]
        update = exp.Update(
            this=exp.Table(this=exp.to_identifier(table, quoted=True)),
            expressions=[exp.EQ(this=column.copy(), expression=contributor(fields))],
            where=exp.Where(this=exp.EQ(this=_field(column, "b"),
                                        expression=exp.Literal.string(str(branch.index)))),
        )
        con.execute(update.sql("duckdb", identify=True))


def _field(column: exp.Column, name: str) -> exp.Expr:
    """json_extract_string(column, '$.name'), which sqlglot renders as DuckDB's `->>`."""
    return exp.JSONExtractScalar(this=column.copy(), expression=exp.Literal.string(f"$.{name}"))


def branch_relations(env: dict[str, DataFrame], branch: Branch,
                     select: exp.Expr | None = None) -> Iterator[tuple[tuple, exp.Table]]:
    """(key, exp.Table) of each relation of `branch` (or of `select`, a copy of its SELECT) that
    must be supplied to DuckDB; references to the group's CTEs and local CTEs are skipped.
    `env` holds the statement's completed CTEs and keyword DataFrames."""
    select = branch.select if select is None else select
    refs = {r.binding for r in branch.refs}
    local = {c.alias_or_name.lower() for c in select.find_all(exp.CTE)}
    for table in list(select.find_all(exp.Table)):
        if isinstance(table.this, exp.Placeholder):
            binding = table.this.name
            if binding in refs:
                continue
            base = next((b for b in branch.bases if b.binding == binding), None)
            if base is not None:  # the same table as a base branch's (one pull for both)
                yield ("table", base.table), table
            elif binding in env:
                yield ("env", binding), table
            else:
                raise Untranslatable(f"unbound relation {{{binding}}}")
        elif isinstance(table.this, exp.Identifier):
            if is_cte_reference(table, local):
                continue
            yield ("table", TableName.of(table)), table
        else:
            raise Untranslatable(f"relation {table.sql('rasql')}")


def _rename(table: exp.Table, source: exp.Table, alias: str) -> None:
    renamed = source.copy()
    renamed.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    table.replace(renamed)


def _bind(select: exp.Expr, bindings: dict[str, str]) -> exp.Expr:
    """A copy of `select` with the DuckDB tables of this delta rule in place of the references."""
    tables = {_BIND + binding: table for binding, table in bindings.items()}
    bound = select.copy()
    for table in bound.find_all(exp.Table):
        if table.name in tables:
            table.set("this", exp.to_identifier(tables[table.name], quoted=True))
    return bound


def duck_type(dtype: DataType) -> exp.DataType:
    """The DuckDB type that holds a head column's Spark type exactly, or `Untranslatable`."""
    if isinstance(dtype, DecimalType):
        return exp.DataType.build(f"DECIMAL({dtype.precision}, {dtype.scale})", dialect="duckdb")
    for spark_type, name in _TYPES:
        if isinstance(dtype, spark_type):
            return exp.DataType.build(name)
    raise Untranslatable(f"head type {dtype.simpleString()}")
