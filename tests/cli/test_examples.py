"""Every example under examples/ runs through the CLI (in-process, one shared SparkSession) and its
answer is checked against an oracle computed here from the example's own data files with
networkx or plain Python, never against recsql."""

from __future__ import annotations

import csv
import io
import os
import re
import runpy
from collections import defaultdict
from contextlib import redirect_stdout
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner
from oracles import dijkstra_predecessors, routes

import recsql
from recsql.cli import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DATA = EXAMPLES / "data"


@pytest.fixture(scope="session")
def session_spark(request):
    """The project's `spark` fixture (tests/conftest.py) when there is one, else local[2]."""
    try:
        return request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        return recsql.session("local[2]", **{"spark.sql.shuffle.partitions": "4"})


def rows(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="") as stream:
        return list(csv.DictReader(stream))


def run_example(script: str) -> list[list[str]]:
    """The example's result rows, as the piped CLI prints them (tab-separated, no header).

    The scripts use plain `CREATE TEMP VIEW`, so the views they create are dropped around the
    run (the session is shared with the rest of the suite)."""
    path = EXAMPLES / script
    views = re.findall(r"CREATE\s+TEMP\s+VIEW\s+(\w+)", path.read_text(), re.IGNORECASE)
    spark = recsql.session()
    drop(spark, views)
    try:
        result = CliRunner().invoke(cli, ["-S", "-f", str(path)])
    finally:
        drop(spark, views)
    assert result.exit_code == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def drop(spark, views: list[str]) -> None:
    for view in views:
        spark.catalog.dropTempView(view)


def ints(table: list[list[str]]) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in row) for row in table]


# -- oracles ----------------------------------------------------------------------------------

def sssp_oracle() -> list[tuple[int, int]]:
    graph = nx.DiGraph()
    for r in rows("roads.csv"):
        graph.add_edge(int(r["Src"]), int(r["Dst"]), weight=int(r["Cost"]))
    return sorted(nx.single_source_dijkstra_path_length(graph, 1).items())


def shortest_routes_oracle() -> list[tuple[int, int, int, str]]:
    """A plain-Python Dijkstra keeping the least (minutes, predecessor): ties go to the smaller
    predecessor, as argmin(Minutes) breaks them; the route follows the predecessors back."""
    edges = [(int(r["Src"]), int(r["Dst"]), int(r["Minutes"])) for r in rows("metro.csv")]
    best = dijkstra_predecessors(edges, 1, (1,))
    route = routes({stop: pred for stop, (_, pred) in best.items()}, 1)
    return [(stop, minutes, pred, "[" + ", ".join(map(str, route[stop])) + "]")
            for stop, (minutes, pred) in sorted(best.items())]


def components_oracle() -> list[tuple[int, int, str]]:
    graph = nx.Graph((int(r["A"]), int(r["B"])) for r in rows("friends.csv"))
    parts = sorted(sorted(c) for c in nx.connected_components(graph))
    return [(c[0], len(c), "[" + ", ".join(map(str, c)) + "]") for c in parts]


def reachability_oracle() -> list[str]:
    graph = nx.DiGraph((r["Src"], r["Dst"]) for r in rows("flights.csv"))
    return sorted(nx.descendants(graph, "LAX") | {"LAX"})


def closure_oracle() -> list[tuple[str, str]]:
    graph = nx.DiGraph((r["Course"], r["Prereq"]) for r in rows("prereqs.csv"))
    return sorted((a, b) for a in graph for b in nx.descendants(graph, a))


def count_paths_oracle() -> list[tuple[int, int]]:
    graph = nx.DiGraph((int(r["A"]), int(r["B"])) for r in rows("dag.csv"))
    reachable = nx.descendants(graph, 1)
    counts = {x: len(list(nx.all_simple_paths(graph, 1, x))) for x in reachable}
    return sorted({1: 1, **counts}.items())


def bill_of_materials_oracle() -> list[tuple[str, int]]:
    subs = defaultdict(list)
    for r in rows("assembly.csv"):
        subs[r["Part"]].append(r["Sub"])
    basic = {r["Part"]: int(r["Days"]) for r in rows("basic.csv")}

    def days(part: str) -> int:
        return max([basic.get(part, 0)] + [days(s) for s in subs[part]])

    parts = set(subs) | set(basic) | {s for ss in subs.values() for s in ss}
    return sorted(((p, days(p)) for p in parts), key=lambda x: (-x[1], x[0]))


def organisation_oracle() -> list[tuple[int, int]]:
    graph = nx.DiGraph((int(r["Mgr"]), int(r["Emp"])) for r in rows("report.csv"))
    employees = {int(r["Emp"]) for r in rows("report.csv")}
    # everyone below a manager, plus the manager when it is itself someone's employee
    return sorted((m, len(nx.descendants(graph, m)) + (m in employees)) for m in graph)


def marketing_oracle() -> list[tuple[int, float]]:
    own = defaultdict(float)
    for m, p in {(int(r["M"]), int(r["P"])) for r in rows("sales.csv")}:  # distinct rows
        own[m] += p * 0.1
    recruits = defaultdict(list)
    for r in rows("sponsor.csv"):
        recruits[int(r["M1"])].append(int(r["M2"]))

    def bonus(m: int) -> float:
        return own[m] + sum(0.5 * bonus(c) for c in recruits[m])

    members = set(own) | set(recruits)
    return sorted((m, bonus(m)) for m in members)


def intervals_oracle() -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for s, e in sorted((int(r["S"]), int(r["E"])) for r in rows("intervals.csv")):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [tuple(m) for m in merged]


def same_generation_oracle() -> list[tuple[str, str]]:
    parent = {r["Child"]: r["Parent"] for r in rows("parent.csv")}
    pairs: set[tuple[str, str]] = set()
    while True:  # naive fixpoint of the two rules
        new = {(a, b) for a in parent for b in parent
               if a != b and (parent[a] == parent[b] or (parent[a], parent[b]) in pairs)}
        if new <= pairs:
            return sorted(pairs)
        pairs |= new


# -- the examples --------------------------------------------------------------------------------

def test_there_are_ten_sql_examples_with_their_own_data():
    scripts = sorted(p.name for p in EXAMPLES.glob("*.sql"))
    assert len(scripts) >= 10
    for script in scripts:
        text = (EXAMPLES / script).read_text()
        assert "path 'data/" in text, script


def test_sssp(session_spark):
    assert ints(run_example("sssp.sql")) == sssp_oracle()


def test_shortest_routes(session_spark):
    got = [(int(s), int(m), int(p), stops) for s, m, p, stops in run_example("shortest_routes.sql")]
    assert got == shortest_routes_oracle()
    # the data has equally fast routes, which the predecessor's order decides
    edges = [(int(r["Src"]), int(r["Dst"]), int(r["Minutes"])) for r in rows("metro.csv")]
    best = dijkstra_predecessors(edges, 1, (1,))
    tied = [v for v in best if sum(best[u][0] + w == best[v][0] for u, d, w in edges if d == v and u in best) > 1]
    assert len(tied) >= 3


def test_connected_components(session_spark):
    got = [(int(c), int(n), members) for c, n, members in run_example("connected_components.sql")]
    assert got == components_oracle()


def test_reachability(session_spark):
    assert [r[0] for r in run_example("reachability.sql")] == reachability_oracle()


def test_transitive_closure(session_spark):
    assert [tuple(r) for r in run_example("transitive_closure.sql")] == closure_oracle()


def test_count_paths(session_spark):
    assert ints(run_example("count_paths.sql")) == count_paths_oracle()


def test_bill_of_materials(session_spark):
    got = [(p, int(d)) for p, d in run_example("bill_of_materials.sql")]
    assert got == bill_of_materials_oracle()


def test_organisation_size(session_spark):
    got = ints(run_example("organisation_size.sql"))
    assert got == organisation_oracle()
    # the worked example of DIALECT.md section 2
    assert dict(got) == {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 3, 7: 3, 8: 2, 9: 6, 10: 9}


def test_multi_level_marketing(session_spark):
    got = [(int(m), float(b)) for m, b in run_example("multi_level_marketing.sql")]
    expected = marketing_oracle()
    assert [m for m, _ in got] == [m for m, _ in expected]
    assert [b for _, b in got] == pytest.approx([b for _, b in expected])


def test_interval_coalescing(session_spark):
    assert ints(run_example("interval_coalescing.sql")) == intervals_oracle()


def test_same_generation(session_spark):
    assert [tuple(r) for r in run_example("same_generation.sql")] == same_generation_oracle()


def role_permissions_oracle() -> list[tuple[str, int]]:
    """Each role's bits OR'ed with those of every role it inherits from (a plain fixpoint)."""
    bits = {r["Role"]: int(r["Bits"]) for r in rows("grants.csv")}
    inherits = [(r["Role"], r["Parent"]) for r in rows("inherits.csv")]
    changed = True
    while changed:
        changed = False
        for role, parent in inherits:
            if bits[role] | bits[parent] != bits[role]:
                bits[role] |= bits[parent]
                changed = True
    return sorted(bits.items())


def test_role_permissions(session_spark):
    """Its two spellings, the RaSQL head and the Spark grammar's GROUP BY, one after the other."""
    got = [(role, int(b)) for role, b in run_example("role_permissions.sql")]
    assert got == role_permissions_oracle() * 2


def test_python_api_example(session_spark):
    """examples/python_api.py as a script (it reuses the active session)."""
    out = io.StringIO()
    with redirect_stdout(out):
        namespace = runpy.run_path(str(EXAMPLES / "python_api.py"), run_name="__main__")
    assert "Shortest paths from node 1" in out.getvalue()
    paths = [(r.Dst, r.Cost) for r in namespace["shortest_paths"](session_spark).collect()]
    assert paths == sssp_oracle()
    teams = {r.Mgr: r.Cnt for r in namespace["big_teams"](session_spark, least=2).collect()}
    assert teams == {m: c for m, c in organisation_oracle() if c > 2}


def test_examples_run_from_any_folder(session_spark, tmp_path, monkeypatch):
    """Data paths are relative to the script's folder, not to the working directory."""
    monkeypatch.chdir(tmp_path)
    assert ints(run_example("count_paths.sql")) == count_paths_oracle()
    assert not os.listdir(tmp_path)
