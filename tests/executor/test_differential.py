"""The driver endgame (DuckDB) against the Spark loop: same rows, types and values, or the same
error. The Spark loop is the oracle here because it is Spark's own evaluation of the branch
(tests/executor/test_algorithms.py checks the Spark loop against networkx and friends).

Property-based: hypothesis writes recursive branches over typed columns (integers at their
limits, decimals, doubles with NaN and infinities, unicode strings, dates, booleans, NULLs,
zeros and negatives); whatever the allowlist (recsql/executor/endgame/driver_sql.py) lets onto the
driver must agree with Spark, and whatever it keeps on Spark agrees trivially."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recsql
from recsql import RecSQLError

DRIVER = {"spark.recsql.endgame.enabled": "true", "spark.recsql.endgame.maxDeltaRows": 1000000}
SPARK = {"spark.recsql.endgame.enabled": "false"}

ROWS = [
    # k, i (INT), l (BIGINT), d (DOUBLE), s (STRING), b, dt (DATE), dec (DECIMAL(10, 2))
    (0, 1, 1, 1.0, "a", True, dt.date(2024, 1, 1), Decimal("1.00")),  # the anchor: benign
    (1, 0, 0, 0.0, "", True, dt.date(2024, 1, 1), Decimal("0.00")),
    (6, 2147483647, 9223372036854775807, float("nan"), "é", False, dt.date(1970, 1, 1),
     Decimal("99999999.99")),
    (2, -2147483648, -9223372036854775808, float("inf"), "日本語", None, dt.date(2000, 2, 29),
     Decimal("-0.01")),
    (3, -1, 1, -0.0, "a b", True, None, None),
    (4, None, None, None, None, None, dt.date(1999, 12, 31), Decimal("1.50")),
    (5, 7, -3, -1.5e300, "ABC", False, dt.date(2038, 1, 19), Decimal("-2.50")),
]
SCHEMA = "k INT, i INT, l BIGINT, d DOUBLE, s STRING, b BOOLEAN, dt DATE, dec DECIMAL(10, 2)"


@pytest.fixture(scope="module")
def typed(spark):
    spark.createDataFrame(ROWS, SCHEMA).createOrReplaceTempView("dv")
    yield
    spark.catalog.dropTempView("dv")


def fan_query(expression: str) -> str:
    """A recursion whose one recursive step evaluates `expression` on every row of dv but the
    anchor (whose row is benign, so that a failure or a difference shows in the recursive step);
    the second step finds nothing new. Two iterations keep each Spark run short."""
    return f"""WITH recursive r (K, V) AS (SELECT k, {expression} FROM dv WHERE k = 0)
      UNION (SELECT dv.k, {expression} FROM r, dv WHERE r.K = 0 AND dv.k > 0)
    SELECT K, V FROM r"""


def filter_query(predicate: str) -> str:
    """Like `fan_query`, with `predicate` filtering the recursive step's rows instead."""
    return f"""WITH recursive r (K, V) AS (SELECT k, 0 FROM dv WHERE k = 0)
      UNION (SELECT dv.k, 1 FROM r, dv WHERE r.K = 0 AND {predicate})
    SELECT K, V FROM r"""


def aggregate_query(aggregate: str):
    """Like `fan_query` with a `min()`/`max()`/`sum()` head: the recursive step's rows fall into
    two groups of three, so the aggregate chooses among values (NaN, infinities, unicode, ...)."""
    def query(expression: str) -> str:
        return f"""WITH recursive r (K, {aggregate}() AS V) AS (SELECT k, {expression} FROM dv WHERE k = 0)
          UNION (SELECT CASE WHEN dv.k < 4 THEN 1 ELSE 2 END, {expression}
                 FROM r, dv WHERE r.K = 0 AND dv.k > 0)
        SELECT K, V FROM r"""
    query.__name__ = f"{aggregate}_query"
    return query


def outcome(spark, query: str, conf: dict):
    """(rows with NaN made comparable, column types, where the iterations ran) or the error."""
    try:
        result = recsql.run(query, spark=spark, conf=conf)
        rows = sorted((tuple(_comparable(v) for v in r) for r in result.df.collect()), key=repr)
        types = [f.dataType.simpleString() for f in result.df.schema.fields]
        return ("rows", rows, types), {s.ran_on for s in result.stats}
    except RecSQLError as error:
        return ("error", error.condition), set()


def _comparable(value):
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def assert_same(spark, expression: str, query_of=fan_query) -> set:
    query = query_of(expression)
    on_driver, places = outcome(spark, query, DRIVER)
    on_spark, _ = outcome(spark, query, SPARK)
    assert on_driver == on_spark, f"{expression}: driver {on_driver} vs Spark {on_spark}"
    return places


# -- generated branches -----------------------------------------------------------------------

NUMBERS = ["dv.i", "dv.l", "dv.d", "dv.dec", "dv.k", "0", "1", "-1", "2147483647",
           "9223372036854775807", "1.5", "0.1", "1e3", "CAST('NaN' AS DOUBLE)", "NULL"]
STRINGS = ["dv.s", "'x'", "'é'", "''", "NULL"]
BOOLEANS = ["dv.b", "TRUE", "NULL"]


def typed_expressions(depth: int = 2):
    """(numbers, strings, booleans): well-typed expressions, so most examples reach evaluation."""
    if depth == 0:
        return tuple(st.sampled_from(leaves) for leaves in (NUMBERS, STRINGS, BOOLEANS))
    num, text, flag = typed_expressions(depth - 1)
    numbers = st.one_of(
        num,
        st.tuples(num, st.sampled_from(["+", "-", "*", "/", "%"]), num).map(" ".join).map(_par),
        st.sampled_from(["-{}", "abs({})", "round({}, 1)", "coalesce({}, 0)", "CAST({} AS INT)",
                         "CAST({} AS BIGINT)", "CAST({} AS DOUBLE)"]).flatmap(
            lambda f: num.map(f.format)),
        st.sampled_from(["length({})", "CAST({} AS INT)", "instr({}, 'a')"]).flatmap(
            lambda f: text.map(f.format)),
        st.tuples(flag, num, num).map(lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"),
    )
    texts = st.one_of(
        text,
        st.sampled_from(["upper({})", "lower({})", "substr({}, 0, 2)", "substr({}, 2)",
                         "trim({})", "reverse({})"]).flatmap(lambda f: text.map(f.format)),
        st.sampled_from(["CAST({} AS STRING)", "format_number({}, 2)"]).flatmap(
            lambda f: num.map(f.format)),
        st.tuples(text, text).map(lambda t: f"({t[0]} || {t[1]})"),
    )
    flags = st.one_of(
        flag,
        st.tuples(num, st.sampled_from(["=", "<", "<>", ">="]), num).map(" ".join).map(_par),
        st.tuples(text, st.sampled_from(["=", "<"]), text).map(" ".join).map(_par),
        flag.map("NOT {}".format), num.map("{} IS NULL".format),
        st.tuples(flag, st.sampled_from(["AND", "OR"]), flag).map(" ".join).map(_par),
    )
    return numbers, texts, flags


def _par(text: str) -> str:
    return f"({text})"


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(expression=st.one_of(*typed_expressions()))
def test_driver_agrees_with_spark_on_generated_branches(spark, typed, expression):
    assert_same(spark, expression)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(aggregate=st.sampled_from(["min", "max", "sum"]),
       expression=st.one_of(*typed_expressions()[:2]))
def test_driver_agrees_with_spark_on_generated_aggregates(spark, typed, aggregate, expression):
    assert_same(spark, expression, aggregate_query(aggregate))


# -- forms that once diverged, and forms that must stay on the driver ------------------------

DIVERGED = [
    "dv.i / (dv.k - 1)",             # DuckDB: NULL; Spark (ANSI): DIVIDE_BY_ZERO
    "dv.i % (dv.k - 1)",             # DuckDB: NULL; Spark: REMAINDER_BY_ZERO
    "CAST(dv.d AS STRING)",          # number formats differ (1.0E300 vs 1e+300)
    "substr(dv.s, 0, 2)",            # position 0 differs
    "upper(dv.s)",                   # unicode case rules
    "CAST(dv.s AS INT)",             # Spark (ANSI): CAST_INVALID_INPUT; TRY_CAST in DuckDB
    "dv.i + 1",                      # INT overflow at 2147483647: an error in both
    "dv.dec * dv.dec",
    "dv.l * 2",
    "CASE WHEN dv.b THEN dv.i ELSE dv.d END",
    "dv.d * 0.5",
    # DuckDB's optimizer skipped the overflowing sum or product that Spark (ANSI) reports:
    "NOT (dv.k + 9223372036854775807) IS NULL",  # folded to TRUE: dv.k > 0 is never null
    "((dv.i + 1) = 5)",                            # rewritten to dv.i = 4
    "((dv.i * 2) = 0)",                            # rewritten to dv.i = 0
    "((dv.k + 2147483647) > 0)",
]


@pytest.mark.parametrize("expression", DIVERGED)
def test_known_divergences_agree(spark, typed, expression):
    assert_same(spark, expression)


# Operators written without parentheses, grouped as Spark's grammar groups them (`||` with `+`,
# then the shifts, `&`, `^`, `|`): sqlglot's own parser put `||` and every bitwise operator on one
# level, so `dv.k | 1 << dv.k` ran as `(dv.k | 1) << dv.k` on both paths. The oracle is Spark's
# evaluation of the same expression, outside recsql.
UNPARENTHESISED = [
    "dv.k | 1 << dv.k",
    "1 << dv.k | 2 << dv.k",
    "dv.l | dv.k & 3",
    "dv.k ^ dv.k & 1",
    "dv.k | dv.k ^ 3",
    "dv.k & 6 ^ 3",
    "dv.k << 2 + 1",
    "dv.l >>> 60",
    "CAST(dv.k AS STRING) || dv.k + 1",
    "dv.k - 1 || dv.k",
    "dv.k * 2 || dv.k - 1 || 'x'",
]


@pytest.mark.parametrize("expression", UNPARENTHESISED)
def test_operators_group_as_spark_parses_them(spark, typed, expression):
    spark_rows = {(r[0], _comparable(r[1]))
                  for r in spark.sql(f"SELECT k, {expression} FROM dv WHERE k > 0").collect()}
    for conf in (DRIVER, SPARK):
        (kind, rows, _types), _ = outcome(spark, fan_query(expression), conf)
        assert kind == "rows"
        assert {row for row in rows if row[0] > 0} == spark_rows, (expression, conf)


# Spark tests a filter's conjuncts in order on every row; DuckDB orders them its own way, so the
# row whose sum overflows in Spark never reached the sum (the driver gave rows)
FILTERS = [
    "(dv.i + 1) > 0 AND dv.k < 2",
    "(dv.i * 2) <> 0 AND dv.k IN (1, 3)",
    "CAST(dv.l AS INT) > 0 AND dv.k = 1",
    "dv.k < 2 AND (dv.i + 1) > 0",
]


@pytest.mark.parametrize("predicate", FILTERS)
def test_filters_agree(spark, typed, predicate):
    assert_same(spark, predicate, filter_query)


ON_DRIVER = [
    ("dv.k * 2 + 1", fan_query),
    ("CASE WHEN dv.k > 2 THEN dv.k ELSE -dv.k END", fan_query),
    ("CAST(dv.k * 1.5 AS INT)", fan_query),
    ("dv.k * 0.5 + 1", fan_query),
    ("dv.k < 3 AND dv.b", filter_query),  # a filter without arithmetic or casts
    # the driver's merge orders values as Spark does: NaN above infinity, strings by code point
    ("dv.d", aggregate_query("min")),
    ("dv.d", aggregate_query("max")),
    ("dv.s", aggregate_query("max")),
    ("dv.dt", aggregate_query("min")),
    ("dv.dec", aggregate_query("max")),
    ("dv.d", aggregate_query("sum")),
]


@pytest.mark.parametrize("expression, query_of", ON_DRIVER)
def test_allowlisted_forms_run_on_the_driver(spark, typed, expression, query_of):
    places = assert_same(spark, expression, query_of)
    assert "driver" in places, f"{expression} never reached the driver"


# -- payload columns (argmin / argmax) ----------------------------------------------------------

COLUMNS = dict(zip(["k", "i", "l", "d", "s", "b", "dt", "dec"], range(8)))


def payload_query(aggregate: str, value: str, payload: list[str]) -> str:
    """`aggregate_query` with payload columns following V's winner: the groups of three rows tie
    or differ on V as `value` makes them, and the payload breaks the ties."""
    items = ", ".join([value, *payload])
    heads = ", ".join(f"arg{aggregate}(V) AS P{i}" for i in range(len(payload)))
    outputs = ", ".join(f"P{i}" for i in range(len(payload)))
    return f"""WITH recursive r (K, {aggregate}() AS V, {heads}) AS (SELECT k, {items} FROM dv WHERE k = 0)
      UNION (SELECT CASE WHEN dv.k < 4 THEN 1 ELSE 2 END, {items} FROM r, dv WHERE r.K = 0 AND dv.k > 0)
    SELECT K, V, {outputs} FROM r"""


def spark_order(value):
    """A sort key ordering values as Spark orders them inside a struct: NULL first, NaN above
    every other double, -0.0 equal to 0.0, strings by code point (UTF-8 byte order)."""
    if value is None:
        return (0,)
    if isinstance(value, float):
        return (1, 1, 0.0) if math.isnan(value) else (1, 0, value + 0.0)
    return (1, 0, value)


def payload_oracle(aggregate: str, value: str, payload: list[str]) -> list[tuple]:
    """Plain Python: per group, the extremum of (value, payload...) in Spark's ordering, a NULL
    value never beating a non-NULL one."""
    groups: dict[int, list[tuple]] = {}
    for row in ROWS:
        group = 0 if row[0] == 0 else (1 if row[0] < 4 else 2)
        columns = [value, *payload]
        tup = tuple(int(c) if c.isdigit() else row[COLUMNS[c.removeprefix("dv.")]] for c in columns)
        groups.setdefault(group, []).append(tup)
    pick = min if aggregate == "min" else max
    result = []
    for group, tuples in groups.items():
        def key(t):
            null_last = (t[0] is None) if aggregate == "min" else (t[0] is not None)
            return (null_last, *[spark_order(v) for v in t])
        result.append((group, *pick(tuples, key=key)))
    return sorted((tuple(_comparable(v) for v in r) for r in result), key=repr)


PAYLOADS = [
    ("min", "1", ["dv.d", "dv.s"]),  # all tie on V: the double payload decides, -0.0 = 0.0
    ("max", "1", ["dv.d", "dv.s"]),  # NaN above infinity
    ("min", "dv.d", ["dv.s"]),
    ("max", "dv.i", ["dv.dt"]),  # a NULL value never wins; dates as payload
    ("min", "dv.i", ["dv.dec"]),
    ("min", "1", ["dv.b", "dv.s"]),  # NULL payload first (Spark's order), then the next column
    ("max", "1", ["dv.b", "dv.dt", "dv.k"]),
    ("min", "1", ["dv.s", "dv.k"]),  # unicode strings by code point
]


@pytest.mark.parametrize("aggregate, value, payload", PAYLOADS)
def test_payload_agrees_with_spark_and_python(spark, typed, aggregate, value, payload):
    query = payload_query(aggregate, value, payload)
    on_driver, places = outcome(spark, query, DRIVER)
    on_spark, _ = outcome(spark, query, SPARK)
    assert on_driver == on_spark, f"driver {on_driver} vs Spark {on_spark}"
    assert "driver" in places, "never reached the driver"
    assert on_spark[0] == "rows", on_spark
    assert on_spark[1] == payload_oracle(aggregate, value, payload)


def test_a_float_compared_with_a_decimal_or_integer_stays_on_spark(spark):
    """Spark compares a FLOAT with a DECIMAL or an integer in DOUBLE, DuckDB in FLOAT: a FLOAT
    column holding 0.1 equals the literal 0.1 on DuckDB only. Such a filter stays on Spark (the
    answer: no row, as a plain-Python comparison of float32(0.1) with 0.1 says)."""
    spark.createDataFrame([(0, 0.5), (1, 0.1), (2, 16777217.0)], "k INT, f FLOAT") \
        .createOrReplaceTempView("dv_float")
    try:
        for predicate, expected in [("dv_float.f = 0.1", []), ("dv_float.f = 16777217", [])]:
            query = f"""WITH recursive r (K) AS (SELECT k FROM dv_float WHERE k = 0)
              UNION (SELECT dv_float.k FROM r, dv_float WHERE r.K = 0 AND {predicate})
            SELECT K FROM r"""
            result = recsql.run(query, spark=spark, conf=DRIVER)
            assert sorted(r.K for r in result.df.collect()) == [0, *expected], predicate
    finally:
        spark.catalog.dropTempView("dv_float")


# -- string functions --------------------------------------------------------------------------

TEXT_ROWS = [
    # k, s, p (INT), n (INT), c (BIGINT)
    (0, "a", 1, 1, 65),  # the anchor: benign
    (1, "", 0, 2, 0),
    (2, "abc", -1, -1, -1),
    (3, "é日😀x", -5, 100, 256 + 66),
    (4, None, None, None, None),
    (5, "ßİσΣ", 2, 0, 255),
    (6, "e\u0301👨\u200d👩\u200d👧", -2147483648, 2147483647, 9223372036854775807),
    (7, "Ab c", 2147483647, -2147483648, -9223372036854775808),
    (8, "a\x00b", 5, 3, 128),
]
TEXT_SCHEMA = "k INT, s STRING, p INT, n INT, c BIGINT"


@pytest.fixture(scope="module")
def texts(spark):
    rows = spark.createDataFrame(TEXT_ROWS, TEXT_SCHEMA)
    rows.createOrReplaceTempView("dt")
    rows.where("k IN (0, 1, 2, 4, 7, 8)").createOrReplaceTempView("dt_ascii")  # ASCII or NULL text
    yield
    spark.catalog.dropTempView("dt")
    spark.catalog.dropTempView("dt_ascii")


def text_query(expression: str, table: str = "dt") -> str:
    """`fan_query` over `table` (dt or dt_ascii, read as dt)."""
    return f"""WITH recursive r (K, V) AS (SELECT k, {expression} FROM {table} AS dt WHERE k = 0)
      UNION (SELECT dt.k, {expression} FROM r, {table} AS dt WHERE r.K = 0 AND dt.k > 0)
    SELECT K, V FROM r"""


def text_filter(predicate: str, table: str = "dt") -> str:
    return f"""WITH recursive r (K, V) AS (SELECT k, 0 FROM {table} AS dt WHERE k = 0)
      UNION (SELECT dt.k, 1 FROM r, {table} AS dt WHERE r.K = 0 AND {predicate})
    SELECT K, V FROM r"""


TEXT_FORMS = [
    # `||` and CONCAT: NULL if any operand is NULL (DuckDB's CONCAT skips NULLs)
    "dt.s || 'x'", "dt.s || dt.s", "'x' || NULL", "concat(dt.s, '-', dt.s)", "concat(dt.s, NULL)",
    "concat(dt.s)", "dt.s || (dt.s || 'y')",
    # code points, an INT
    "length(dt.s)", "length(dt.s) + 1", "char_length(dt.s) * 2", "length(dt.s || dt.s)",
    # SUBSTR: position 0 is 1, a negative one counts from the end, a negative length is 0, a
    # start before the string shortens the length; extreme positions and lengths; NULLs
    "substr(dt.s, dt.p)", "substr(dt.s, dt.p, dt.n)", "substr(dt.s, 0, 2)", "substr(dt.s, 0)",
    "substr(dt.s, -1)", "substr(dt.s, -5, 3)", "substring(dt.s, 2, -1)", "substr(dt.s, dt.p, 2)",
    "substr(dt.s, 1, dt.n)", "substring(dt.s FROM 2 FOR 2)", "substr(dt.s, 2)",
    # CHR: '' below 0, else the character n % 256 (CHR(0) is U+0000); ASCII: the first code point
    "chr(dt.c)", "char(dt.p)", "chr(dt.n)", "chr(0)", "chr(-1)", "chr(256 + 65)", "chr(dt.k + 64)",
    "ascii(dt.s)", "ascii('')", "char(ascii(substr(dt.s, -1)) + 1)", "dt.s || char(ascii(substr(dt.s, -1)) + 1)",
    # case mappings beyond ASCII differ (`ß`): DuckDB raises, Spark answers
    "upper(dt.s)", "lower(dt.s)",
]


@pytest.mark.parametrize("expression", TEXT_FORMS)
def test_string_functions_agree_and_run_on_the_driver(spark, texts, expression):
    places = assert_same(spark, expression, text_query)
    if not expression.startswith(("upper", "lower")):
        assert "driver" in places, f"{expression} never reached the driver"


@pytest.mark.parametrize("expression", ["upper(dt.s)", "lower(dt.s)", "upper(lower(dt.s)) || lower(dt.s)"])
def test_case_mappings_of_ascii_text_run_on_the_driver(spark, texts, expression):
    places = assert_same(spark, expression, lambda e: text_query(e, "dt_ascii"))
    assert "driver" in places, f"{expression} never reached the driver"


@pytest.mark.parametrize("predicate, table", [
    ("length(dt.s) < 3", "dt"), ("substr(dt.s, -1) = 'c'", "dt"), ("dt.s || 'x' = 'abcx'", "dt"),
    ("chr(dt.c) = 'B'", "dt"), ("ascii(dt.s) > 200", "dt"), ("upper(dt.s) = 'AB C'", "dt_ascii"),
])
def test_string_filters_agree_and_run_on_the_driver(spark, texts, predicate, table):
    places = assert_same(spark, predicate, lambda p: text_filter(p, table))
    assert "driver" in places, f"{predicate} never reached the driver"


@pytest.mark.parametrize("expression", [
    "dt.k || 'x'",  # a number as a string: Spark's cast
    "length(dt.c)", "substr(dt.s, dt.c)", "chr(1.5)", "ascii(dt.k)",
])
def test_string_functions_of_other_types_stay_on_spark(spark, texts, expression):
    assert assert_same(spark, expression, text_query) <= {"spark"}


# -- outer, semi and anti joins ----------------------------------------------------------------

KEYS = [(1,), (1,), (None,), (7,), (2147483647,), (-3,)]  # duplicates and a NULL key


@pytest.fixture(scope="module")
def keys(spark, typed):
    spark.createDataFrame(KEYS, "x INT").createOrReplaceTempView("dk")
    yield
    spark.catalog.dropTempView("dk")


def join_query(source: str, items: str = "r.V, t.x") -> str:
    """A bag recursion (Spark's own syntax, so that Spark answers it too) whose base step holds
    every row of dv (NULLs too) and whose one recursive step joins them as `source` says,
    twice (K + 10, then K + 20)."""
    return f"""WITH RECURSIVE r(K, V, W) AS (SELECT k, i, 0 FROM dv UNION ALL
      SELECT r.K + 10, {items} FROM {source} WHERE r.K < 20) SELECT * FROM r"""


JOINS = [
    "r LEFT JOIN dk AS t ON t.x = r.V",
    "r LEFT OUTER JOIN dk AS t ON t.x = r.V AND r.K < 5",
    "r LEFT JOIN dk AS t ON t.x < r.V",
    "r LEFT JOIN dk AS t ON t.x = r.V OR (t.x IS NULL AND r.V IS NULL)",
    "dk AS t RIGHT JOIN r ON t.x = r.V",
    "dk AS t RIGHT OUTER JOIN r ON t.x = r.V AND t.x > 0",
    "r LEFT JOIN (SELECT 1 AS x) AS t ON t.x = r.V",
    "r JOIN dv ON dv.k = r.K LEFT JOIN dk AS t ON t.x = dv.i",
]
SEMI_ANTI = [
    "r LEFT SEMI JOIN dk AS t ON t.x = r.V",
    "r SEMI JOIN dk AS t ON t.x > r.V",
    "r LEFT ANTI JOIN dk AS t ON t.x = r.V",
    "r ANTI JOIN dk AS t ON t.x = r.V OR t.x IS NULL",
    "r LEFT ANTI JOIN (SELECT -1 AS x) AS t ON t.x = r.V",
    "r LEFT SEMI JOIN (SELECT 0 AS x) AS t ON t.x = r.V",
    "r LEFT ANTI JOIN (SELECT * FROM dk WHERE x > 100) AS t ON t.x = r.V",  # stays on Spark
]


@pytest.mark.parametrize("source, items", [(s, "r.V, t.x") for s in JOINS]
                         + [(s, "r.V, 0") for s in SEMI_ANTI])
def test_outer_semi_and_anti_joins_agree_with_spark(spark, keys, source, items):
    query = join_query(source, items)
    on_driver, places = outcome(spark, query, DRIVER)
    on_spark, _ = outcome(spark, query, SPARK)
    native = sorted((tuple(r) for r in spark.sql(query).collect()), key=repr)
    assert on_driver == on_spark, f"driver {on_driver} vs Spark {on_spark}"
    assert on_spark[1] == native
    if "WHERE" not in source:  # a derived table that reads a relation stays on Spark
        assert "driver" in places, "never reached the driver"
