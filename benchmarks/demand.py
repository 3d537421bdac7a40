"""Demand-driven evaluation: one node's ancestors, and one node's reachable set, through a
transitive-closure view.

    python -m benchmarks demand [--rmat 12] [--tree-depth 16] [--rounds 3] [--questions ...] [--out FILE]

The view `closure(node, reached)` is a stored recursive view (temporary, of this session) over
`tc(X, Y) <- edge; tc(X, Y) <- tc(X, Z), edge(Z, Y)`. Two questions:

* ancestors: `SELECT node FROM closure WHERE reached = t` (bound at the other end: recsql
  evaluates the closure backwards from t), t a deepest leaf of the tree, or RMAT's source;
* reachable set: `SELECT reached FROM closure WHERE node = s` (the anchors filtered on s), s = 2
  in the tree (half of it), RMAT's source;
* between: `SELECT a.reached FROM closure a JOIN closure b ON a.reached = b.node WHERE a.node = s
  AND b.reached = t` (the view read twice, bound at either end: recsql runs the recursion forwards
  from s and a copy of it backwards from t), s = 3 and t the deepest leaf below it in the tree,
  RMAT's source and the least node it reaches.

Side by side, interleaved round by round in one run: recsql with the rewrite (default), recsql
with spark.recsql.demand.enabled=false, Spark 4.3's own `WITH RECURSIVE` on the same filtered CTE
(UNION ALL, so only on the cycle-free tree), DuckDB on the same filtered CTE (UNION), and Spark's
floor: the BFS's answer handed to Spark as a DataFrame and fetched back as recsql's answer is
(what any statement answered through a real DataFrame pays at least). Every
engine hands its answer over as an Arrow table (a Python row per answer row cost pyspark 6.8 s
of the 524,286-row answer, more than its whole evaluation); every answer is checked against a
plain-Python BFS after the clock stops. recsql's rows are the recursion's final state size (its
stats; summed over the recursions a statement runs).

`edge` is the graph's parquet file, as a warehouse table is: not cached by Spark (recsql keeps its
own copies of it across statements, checked against the files' sizes and times); DuckDB loads it
into a table of its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path

import duckdb

import recsql
from benchmarks import measure
from benchmarks.graphs import Graph, bintree, rmat
from recsql.executor.loop.session import session

VIEW = ("CREATE OR REPLACE TEMPORARY VIEW closure AS WITH recursive tc (X, Y) AS "
        "(SELECT Src, Dst FROM edge) UNION (SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) "
        "SELECT X AS node, Y AS reached FROM tc")
NATIVE_TC = ("WITH RECURSIVE tc(X, Y) AS (SELECT Src, Dst FROM edge UNION ALL "
             "SELECT tc.X, e.Dst FROM tc JOIN edge e ON tc.Y = e.Src) ")
DUCKDB_TC = ("WITH RECURSIVE tc(X, Y) AS (SELECT Src, Dst FROM edge UNION "
             "SELECT tc.X, e.Dst FROM tc JOIN edge e ON tc.Y = e.Src) ")
# question -> (recsql over the view, Spark's WITH RECURSIVE, DuckDB's), each with {v} (or {s}, {t})
QUESTIONS = {
    "ancestors": ("SELECT node FROM closure WHERE reached = {v}",
                  NATIVE_TC + "SELECT DISTINCT X AS node FROM tc WHERE Y = {v}",
                  DUCKDB_TC + "SELECT X AS node FROM tc WHERE Y = {v}"),
    "reachable": ("SELECT reached FROM closure WHERE node = {v}",
                  NATIVE_TC + "SELECT DISTINCT Y AS reached FROM tc WHERE X = {v}",
                  DUCKDB_TC + "SELECT Y AS reached FROM tc WHERE X = {v}"),
    # the view read twice, bound at either end: recsql runs one recursion forwards from s and a
    # copy of it backwards from t
    "between": ("SELECT a.reached FROM closure a JOIN closure b ON a.reached = b.node "
                "WHERE a.node = {s} AND b.reached = {t}",
                NATIVE_TC + "SELECT DISTINCT a.Y FROM tc a JOIN tc b ON a.Y = b.X WHERE a.X = {s} AND b.Y = {t}",
                DUCKDB_TC + "SELECT a.Y FROM tc a JOIN tc b ON a.Y = b.X WHERE a.X = {s} AND b.Y = {t}"),
}
ON, OFF, SPARK, DUCK = ("recsql, demand on (default)", "recsql, demand off", "Spark WITH RECURSIVE",
                        "DuckDB")
# Not an engine: Spark's own part of any answer recsql gives, the answer handed to it already
# computed (its rows made a DataFrame, as recsql's driver fixpoint hands its state back, one
# selectExpr as the final query, the client's toArrow). No statement can take less than this.
FLOOR = "Spark floor: the answer given, as a DataFrame"
ENGINES = (ON, OFF, SPARK, DUCK, FLOOR)


def bfs(graph: Graph, start: int, backwards: bool) -> set[int]:
    """Nodes reachable from `start` by a path of at least one edge (against the edges: nodes
    from which `start` is reachable)."""
    succ = defaultdict(list)
    for s, d in zip(graph.src.tolist(), graph.dst.tolist()):
        if backwards:
            s, d = d, s
        succ[s].append(d)
    seen, todo = set(), list(succ[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(succ[node])
    return seen


def load() -> str:
    """The 1-minute load average."""
    return measure.load().split(" / ")[0]


def bound_nodes(graph: Graph, depth: int | None) -> dict[str, dict[str, int]]:
    """The nodes each question binds: a deepest leaf and node 2 in the tree, else the source;
    between: node 3 and the deepest leaf below it in the tree, else the source and the least node
    it reaches."""
    if depth:
        leaf = 2 ** (depth + 1) - 1
        return {"ancestors": {"v": leaf}, "reachable": {"v": 2}, "between": {"s": 3, "t": leaf}}
    first = min(bfs(graph, graph.source, backwards=False) - {graph.source})
    return {"ancestors": {"v": graph.source}, "reachable": {"v": graph.source},
            "between": {"s": graph.source, "t": first}}


def expected_answer(graph: Graph, question: str, bound: dict[str, int]) -> set[int]:
    if question == "between":
        return bfs(graph, bound["s"], backwards=False) & bfs(graph, bound["t"], backwards=True)
    return bfs(graph, bound["v"], backwards=question == "ancestors")


def run(args) -> list[str]:
    spark = session("local[2]", "demand-bench", **{"spark.ui.enabled": "false",
                                                    "spark.sql.cteRecursionLevelLimit": "-1",
                                                    "spark.sql.cteRecursionRowLimit": "-1"})
    graphs = ([(bintree(args.tree_depth), args.tree_depth)] if args.tree_depth else []) + \
        ([(rmat(args.rmat), None)] if args.rmat else [])
    lines = ["# Demand-driven evaluation: one node's ancestors and reachable set through a closure view", "",
             *measure.stamp(), f"- Spark local[2], DuckDB {duckdb.__version__}", "",
             "Seconds per run until the answer is an Arrow table on the client, engines interleaved "
             "per round; min and median over the rounds. Rows: the recursions' states at their "
             "fixpoints (summed where a statement runs several).",
             ""]
    for graph, depth in graphs:
        bound = bound_nodes(graph, depth)
        expected = {q: expected_answer(graph, q, bound[q]) for q in args.questions}
        edges = spark.read.parquet(str(graph.parquet())).selectExpr("Src", "Dst")
        edges.createOrReplaceTempView("edge")
        started = time.perf_counter()
        created = recsql.run(VIEW, spark=spark)  # analysed, not run: no iteration
        create_seconds = time.perf_counter() - started
        assert not created.stats, "CREATE VIEW ran the recursion"
        con = duckdb.connect()
        con.execute(f"SET threads = {os.cpu_count() or 1}")
        con.execute(f"CREATE TABLE edge AS SELECT Src, Dst FROM read_parquet('{graph.parquet()}')")
        times: dict[tuple[str, str], list[float]] = defaultdict(list)
        produced: dict[tuple[str, str], int | None] = {}
        loads = []
        for round_ in range(args.rounds):
            for question in args.questions:
                for name in ENGINES:
                    if not _runs(args, graph, name, question, round_):
                        continue
                    loads.append(load())
                    engine = (_floor(spark, expected[question]) if name == FLOOR else
                              _engine(spark, con, name, QUESTIONS[question], bound[question]))
                    start = time.perf_counter()
                    table, rows = engine()
                    times[(question, name)].append(time.perf_counter() - start)
                    answer = set(table.column(0).to_pylist())
                    assert answer == expected[question], f"{name} on {graph.name}, {question}: wrong answer"
                    produced[(question, name)] = rows
                    print(f"{graph.name} {question} {name} round {round_}: "
                          f"{times[(question, name)][-1]:.2f}s rows={rows}", flush=True)
        lines += [f"## {graph.name}: {graph.description}; {graph.m} edges", "",
                  f"CREATE VIEW closure: {create_seconds:.2f} s, no iteration (typed by analysis).  ",
                  f"Load averages during the runs: {', '.join(loads)}", ""]
        for question in args.questions:
            lines += [f"### {question} of {', '.join(map(str, bound[question].values()))}: "
                      f"`{QUESTIONS[question][0].format(**bound[question])}`, "
                      f"{len(expected[question])} rows", "",
                      "| engine | min s | median s | runs | recursion rows | answer |",
                      "|---|---:|---:|---:|---:|---|"]
            for name in ENGINES:
                t = times[(question, name)]
                if not t:
                    why = ("cannot: UNION ALL only, and the graph has cycles (never terminates)"
                           if name == SPARK and not graph.acyclic else
                           "not run (--skip-spark)" if name == SPARK else "not run (--skip-off)")
                    lines.append(f"| {name} | - | - | 0 | - | {why} |")
                    continue
                rows = produced[(question, name)]
                if name == FLOOR:
                    lines.append(f"| {name} | {min(t):.2f} | {statistics.median(t):.2f} | {len(t)} | - | "
                                 "the BFS's answer |")
                    continue
                lines.append(f"| {name} | {min(t):.2f} | {statistics.median(t):.2f} | {len(t)} | "
                             f"{rows if rows is not None else 'n/a'} | matches BFS |")
            on = statistics.median(times[(question, ON)])
            ratios = [f"{other}: {statistics.median(times[(question, other)]) / on:.1f}x"
                      for other in (OFF, SPARK, DUCK) if times[(question, other)]]
            lines += ["", f"Median of each engine / median of recsql with the rewrite: {', '.join(ratios)}", ""]
            if times[(question, OFF)]:
                off, floor = statistics.median(times[(question, OFF)]), statistics.median(times[(question, FLOOR)])
                lines += [f"Without the rewrite / Spark's floor: {off / floor:.0f}x (the most any "
                          f"rewrite could reach in this run); recsql with the rewrite is "
                          f"{on / floor:.1f}x the floor.", ""]
        con.close()
        if args.out:  # what is measured so far survives a later graph that does not finish
            _write(args.out, lines)
    spark.stop()
    return lines


def _runs(args, graph: Graph, name: str, question: str, round_: int) -> bool:
    if name == SPARK:
        return graph.acyclic and not args.skip_spark
    if name == OFF:  # once per graph and question (minutes each): the first round only
        return not args.skip_off and round_ == 0 and (not args.off_for or question in args.off_for)
    return True


def _floor(spark, answer: set[int]):
    import pyarrow as pa

    table = pa.table({"node": pa.array(sorted(answer), pa.int64())})
    return lambda: (spark.createDataFrame(table).selectExpr("node").toArrow(), None)


def _engine(spark, con, name: str, queries: tuple[str, str, str], values: dict[str, int]):
    mine, native, duck = (q.format(**values) for q in queries)
    if name in (ON, OFF):
        conf = {} if name == ON else {"spark.recsql.demand.enabled": "false"}

        def through_recsql():
            result = recsql.run(mine, spark=spark, conf=conf)
            return result.df.toArrow(), sum(max(s.total_rows for s in result.stats if s.cte == cte)
                                            for cte in {s.cte for s in result.stats})
        return through_recsql
    if name == SPARK:
        return lambda: (spark.sql(native).toArrow(), None)

    def through_duckdb():
        rel = con.sql(duck)
        fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table  # duckdb 2 / 1.x
        return fetch(), None
    return through_duckdb


_KEPT: dict[Path, str] = {}  # a results file's text before this run


def _write(out: Path, lines: list[str]) -> None:
    """This run's section after what `out` held before the run: the file keeps the history of
    the runs (DEMAND.md is read as one), a run is added to it, none is replaced."""
    if out not in _KEPT:
        _KEPT[out] = out.read_text().rstrip() + "\n\n" if out.exists() else ""
    out.write_text(_KEPT[out] + "\n".join(lines) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks demand")
    parser.add_argument("--rmat", type=int, default=12, help="RMAT scale (0: none)")
    parser.add_argument("--tree-depth", type=int, default=16,
                        help="complete binary tree depth, 2^(d+1)-1 nodes (0: none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-off", action="store_true",
                        help="do not run recsql without the rewrite (too slow on large graphs)")
    parser.add_argument("--skip-spark", action="store_true",
                        help="do not run Spark's WITH RECURSIVE (a minute a run on large trees)")
    parser.add_argument("--off-for", nargs="*", choices=list(QUESTIONS), default=None,
                        help="run recsql without the rewrite for these questions only")
    parser.add_argument("--questions", nargs="*", choices=list(QUESTIONS), default=list(QUESTIONS))
    parser.add_argument("--out", type=Path, default=None,
                        help="the results file: this run is added after what it holds")
    args = parser.parse_args(argv)
    lines = run(args)
    print("\n".join(lines))
    if args.out:
        _write(args.out, lines)
