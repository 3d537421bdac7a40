"""Fuzzing the parser and planner (no Spark): mutated and random queries either plan or raise a
`RecSQLError` that says where (line and pos) it is wrong; nothing else escapes."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recsql.errors import RecSQLError
from recsql.parser import parse_statement, split_statements
from recsql.planner import DictCatalog, plan_query

CATALOG = DictCatalog({
    "edge": ["Src", "Dst", "Cost"], "report": ["Mgr", "Emp"], "sales": ["M", "P"],
    "sponsor": ["M1", "M2"], "inter": ["S", "E"], "rc": ["A", "B"],
})

SEEDS = [
    "WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT edge.Dst, "
    "path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) SELECT Dst, Cost FROM path",
    "WITH RECURSIVE path (Dst, min() AS Cost) AS (SELECT 1, 0 UNION SELECT e.Dst, p.Cost + e.Cost "
    "FROM path p JOIN edge e ON p.Dst = e.Src) SELECT * FROM path ORDER BY Cost LIMIT 10",
    "WITH recursive dept(Mgr, count() AS Cnt) AS (SELECT report.Emp, 1 FROM report) UNION "
    "(SELECT report.Mgr, dept.Cnt FROM dept, report WHERE dept.Mgr = report.Emp) SELECT * FROM dept",
    "WITH recursive bonus(M, sum() AS B) AS (SELECT M, P * 0.1 FROM sales) UNION (SELECT "
    "sponsor.M1, bonus.B * 0.5 FROM bonus, sponsor WHERE bonus.M = sponsor.M2) SELECT M, B FROM bonus",
    "WITH RECURSIVE tc(X, Y) AS (SELECT A, B FROM rc UNION SELECT a.X, b.Y FROM tc a JOIN tc b "
    "ON a.Y = b.X) SELECT count(*) FROM tc",
    "WITH RECURSIVE even(X) AS (SELECT 1 UNION SELECT rc.B FROM odd, rc WHERE odd.X = rc.A), "
    "odd(X) AS (SELECT rc.B FROM even, rc WHERE even.X = rc.A) SELECT * FROM even",
    "WITH recursive coal (S, max() AS E) AS (SELECT S, E FROM inter) UNION (SELECT coal.S, inter.E "
    "FROM coal, inter WHERE coal.S <= inter.S AND inter.S <= coal.E) SELECT S, E FROM coal",
]
WORDS = ["SELECT", "FROM", "WHERE", "UNION", "ALL", "WITH", "RECURSIVE", "(", ")", ",", "min()",
         "AS", "path", "edge", "Cost", "=", "+", "NOT", "EXISTS", "LIMIT", "1", "avg()", ";", "'x'"]
POSITIONED = re.compile(r"\(line \d+, pos \d+\)")


def check(query: str) -> None:
    try:
        for text in split_statements(query):
            statement = parse_statement(text)
            if statement.expression is not None:
                plan_query(statement.expression, text, CATALOG)
    except RecSQLError as error:
        assert POSITIONED.search(str(error)), f"error does not say where (line, pos): {error}"


def mutate(query: str, edits: list[tuple[int, int, str]]) -> str:
    tokens = query.split(" ")
    for kind, position, word in edits:
        if not tokens:
            break
        i = position % len(tokens)
        if kind == 0:
            del tokens[i]
        elif kind == 1:
            tokens.insert(i, word)
        elif kind == 2:
            tokens[i] = word
        else:
            tokens[i], tokens[-1 - i] = tokens[-1 - i], tokens[i]
    return " ".join(tokens)


edit = st.tuples(st.integers(0, 3), st.integers(0, 200), st.sampled_from(WORDS))

# The default suite replays the same examples every run (derandomized), so CI cannot fail by
# chance; `pytest -m fuzz` draws fresh random ones, RECSQL_FUZZ_EXAMPLES per property.
FUZZ_EXAMPLES = int(os.environ.get("RECSQL_FUZZ_EXAMPLES", "20000"))
_COMMON = {"deadline": None, "suppress_health_check": list(HealthCheck), "database": None}


def fixed_and_random(examples: int, *strategies):
    """A property as two tests: `examples` derandomized ones in the default suite, and a
    random campaign of FUZZ_EXAMPLES under the `fuzz` marker, without the suite's per-test
    timeout (20,000 examples took 100-300 s each on a quiet machine, over 600 s under load)."""
    def make(prop):
        fixed = settings(max_examples=examples, derandomize=True, **_COMMON)(given(*strategies)(prop))
        campaign = settings(max_examples=FUZZ_EXAMPLES, derandomize=False, **_COMMON)(given(*strategies)(prop))
        return fixed, pytest.mark.timeout(0)(pytest.mark.fuzz(campaign))
    return make


@pytest.mark.parametrize("seed", SEEDS)
def test_seeds_plan(seed):
    statement = parse_statement(seed)
    assert plan_query(statement.expression, seed, CATALOG) is not None


# What random campaigns found: each raised something other than a RecSQLError with line and pos.
FOUND = [
    # an unqualified aggregated column as a join key: KeyError ''
    "WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT edge.Dst, "
    "path.Cost + edge.Cost FROM path, edge WHERE Cost = edge.Src) SELECT Dst, Cost FROM path",
    # a branch of no columns: the head mismatch had nothing to point at
    "WITH RECURSIVE even(X) AS (SELECT UNION SELECT rc.B FROM odd, rc WHERE odd.X = rc.A), "
    "odd(X) AS (SELECT rc.B FROM even, SELECT rc WHERE even.X = rc.A) SELECT * FROM even",
]


@pytest.mark.parametrize("query", FOUND)
def test_found_by_fuzzing(query):
    with pytest.raises(RecSQLError):
        for text in split_statements(query):
            plan_query(parse_statement(text).expression, text, CATALOG)
    check(query)


def mutated_query(seed, edits):
    check(mutate(seed, edits))


def token_soup(words):
    check(" ".join(words))


def random_text(text):
    check(text)


test_mutated_queries_plan_or_raise_recsql_errors, test_fuzz_mutated_queries = fixed_and_random(
    1500, st.sampled_from(SEEDS), st.lists(edit, min_size=1, max_size=4))(mutated_query)
test_random_token_soup, test_fuzz_token_soup = fixed_and_random(
    500, st.lists(st.sampled_from(WORDS), min_size=1, max_size=25))(token_soup)
test_random_text, test_fuzz_random_text = fixed_and_random(300, st.text(max_size=80))(random_text)
