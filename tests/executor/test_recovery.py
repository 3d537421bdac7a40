"""Reliable checkpoints, resume after a driver death, recovery after lost executor blocks.

Every answer is checked against a plain-Python oracle (never against recsql itself)."""

from __future__ import annotations

import heapq
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import rows, unique_name

import recsql
from recsql.executor.loop.failures import BlocksLost
from recsql.executor.loop.fixpoint import GroupRun
from recsql.executor.strategies import recovery

# This file tests the Spark loop's own machinery: every iteration runs on Spark.
pytestmark = pytest.mark.usefixtures("spark_loop")

# The chain is short, and checkpoints come every 3 iterations, so that each test runs a dozen
# Spark-loop iterations: enough to checkpoint twice, fail between checkpoints and resume.
LENGTH = 12  # chain 0 -> 1 -> ... -> LENGTH, plus a few 2-step shortcuts
SHORTCUTS = (3, 7)
EDGES = [(i, i + 1, 1) for i in range(LENGTH)] + [(i, i + 2, 3) for i in SHORTCUTS]

QUERIES = {
    "set": """WITH recursive reach (Node) AS (SELECT 0) UNION
                (SELECT g.Dst FROM reach, g WHERE reach.Node = g.Src)
              SELECT Node FROM reach""",
    "min": """WITH recursive path (Dst, min() AS Cost) AS (SELECT 0, 0) UNION
                (SELECT g.Dst, path.Cost + g.Cost FROM path, g WHERE path.Dst = g.Src)
              SELECT Dst, Cost FROM path""",
    "sum": """WITH recursive cpaths (Dst, sum() AS Cnt) AS (SELECT 0, 1) UNION
                (SELECT g.Dst, cpaths.Cnt FROM cpaths, g WHERE cpaths.Dst = g.Src)
              SELECT Dst, Cnt FROM cpaths""",
    "bag": """WITH RECURSIVE walk (Node, Depth) AS (SELECT 0, 0 UNION ALL
                SELECT g.Dst, walk.Depth + 1 FROM walk JOIN g ON walk.Node = g.Src)
              SELECT Node, Depth FROM walk""",
}


# ------------------------------------------------------------------------------- oracles

def _succ(edges):
    succ = {}
    for s, d, c in edges:
        succ.setdefault(s, []).append((d, c))
    return succ


def oracle(kind: str, edges) -> list[tuple]:
    succ = _succ(edges)
    if kind == "set":
        seen, todo = {0}, [0]
        while todo:
            for d, _ in succ.get(todo.pop(), ()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return sorted((n,) for n in seen)
    if kind == "min":
        best, heap = {0: 0}, [(0, 0)]
        while heap:
            cost, node = heapq.heappop(heap)
            if cost > best[node]:
                continue
            for d, c in succ.get(node, ()):
                if cost + c < best.get(d, float("inf")):
                    best[d] = cost + c
                    heapq.heappush(heap, (cost + c, d))
        return sorted(best.items())
    nodes = sorted({0} | {d for _, d, _ in edges} | {s for s, _, _ in edges})  # topological
    if kind == "sum":
        paths = Counter({0: 1})
        for node in nodes:
            for d, _ in succ.get(node, ()):
                paths[d] += paths[node]
        return sorted((n, p) for n, p in paths.items() if p)
    bag, level = Counter(), Counter({(0, 0): 1})  # bag: every walk's (node, depth)
    while level:
        bag += level
        nxt = Counter()
        for (node, depth), n in level.items():
            for d, _ in succ.get(node, ()):
                nxt[(d, depth + 1)] += n
        level = nxt
    return sorted(bag.elements())


def within(steps: int, edges=EDGES) -> set[int]:
    """Nodes reachable from 0 in at most `steps` edges."""
    succ, level, seen = _succ(edges), {0}, {0}
    for _ in range(steps):
        level = {d for n in level for d, _ in succ.get(n, ())} - seen
        seen |= level
    return seen


# ------------------------------------------------------------------------------- helpers

@pytest.fixture
def graph(spark, tmp_path):
    """Temp view `g` over a parquet file (so the fingerprint sees real input files)."""

    def make(edges, name="g"):
        path = tmp_path / f"edges-{len(edges)}-{time.monotonic_ns()}"
        spark.createDataFrame(edges, "Src int, Dst int, Cost int").coalesce(1) \
            .write.parquet(str(path))
        spark.read.parquet(str(path)).createOrReplaceTempView(name)
        return path

    make(EDGES)
    yield make
    spark.catalog.dropTempView("g")


def conf(directory, interval=3, limit=10000):
    return {"spark.recsql.checkpointDir": str(directory),
            "spark.recsql.checkpointInterval": str(interval),
            "spark.recsql.maxIterations": str(limit)}


# A refused checkpoint restarts the statement from iteration 0 whatever then runs the iterations
# (the fingerprint does not include the endgame setting), so the refused statements of these
# tests are answered on the default path, which finishes them on the driver in a fraction of
# the Spark loop's time.
ENDGAME = {"spark.recsql.endgame.enabled": "true"}


def checkpoints(directory) -> list[Path]:
    """The complete checkpoint directories (`iter-N` holding a manifest) under `directory`."""
    return sorted(p.parent for p in Path(directory).glob(f"*/*/iter-*/{recovery.MANIFEST}"))


def interrupted(spark, query, directory, limit=4, interval=3):
    """Run until maxIterations stops the fixpoint (the chain needs more than 9 iterations): a
    driver death after the checkpoints (by default one, at iteration 3)."""
    with pytest.raises(recsql.RecSQLExecutionError, match="maxIterations"):
        recsql.run(query, spark=spark, conf=conf(directory, interval, limit))


def iterations(result) -> list[int]:
    return [s.iteration for s in result.stats]


# ------------------------------------------------------------------------------- tests

def test_checkpoints_written_every_k_iterations_with_manifest(spark, graph, tmp_path):
    directory = tmp_path / "cp"
    seen = {}

    def progress(stats):  # iteration N's checkpoint is complete when N + 1 starts
        seen[stats.iteration] = [p.name for p in checkpoints(directory)]

    result = recsql.run(QUERIES["set"], spark=spark, conf=conf(directory, interval=3),
                        progress=progress)
    assert rows(result.df) == oracle("set", EDGES)
    assert seen[2] == [] and seen[4] == ["iter-3"] and seen[7] == ["iter-6"]  # the latest only
    last = max(seen)  # the iteration that found nothing new
    assert seen[last] == [f"iter-{3 * ((last - 1) // 3)}"]
    assert not any(directory.iterdir())  # a completed statement removes its checkpoints

    interrupted(spark, QUERIES["set"], directory, limit=6, interval=3)
    [where] = checkpoints(directory)
    assert where.name == "iter-6" and where.parent.name == "reach"
    manifest = json.loads((where / recovery.MANIFEST).read_text())
    assert manifest["iteration"] == 6 and manifest["group"] == ["reach"]
    assert manifest["fingerprint"].startswith(where.parent.parent.name)
    assert manifest["states"]["reach"]["total_rows"] == len(within(6))
    assert sorted(p.name for p in (where / "reach").iterdir()) == ["all", "delta"]
    assert not list(where.parent.parent.parent.glob("**/*.tmp"))


@pytest.mark.parametrize("kind", sorted(QUERIES))
def test_resume_continues_from_the_latest_checkpoint(spark, graph, tmp_path, kind):
    directory = tmp_path / "cp"
    interrupted(spark, QUERIES[kind], directory, limit=7, interval=3)
    assert [p.name for p in checkpoints(directory)] == ["iter-6"]
    result = recsql.run(QUERIES[kind], spark=spark, conf=conf(directory), resume=True)
    assert rows(result.df) == oracle(kind, EDGES)
    assert min(iterations(result)) == 7  # numbering continues after the checkpoint
    assert not checkpoints(directory)


def test_resume_with_nothing_to_resume_runs_from_the_start(spark, graph, tmp_path):
    result = recsql.run(QUERIES["min"], spark=spark, conf=conf(tmp_path / "none"), resume=True)
    assert rows(result.df) == oracle("min", EDGES)
    assert iterations(result)[0] == 0


def test_resume_needs_a_checkpoint_directory(spark, graph):
    with pytest.raises(recsql.RecSQLError, match="checkpoint directory"):
        recsql.sql(QUERIES["set"], spark=spark, resume=True)


def test_checkpoint_of_another_query_is_refused(spark, graph, tmp_path):
    directory = tmp_path / "cp"
    interrupted(spark, QUERIES["min"], directory)
    other = QUERIES["min"].replace("path.Cost + g.Cost", "path.Cost + 2 * g.Cost")
    result = recsql.run(other, spark=spark, conf=conf(directory) | ENDGAME, resume=True)
    assert iterations(result)[0] == 0  # not resumed
    doubled = [(s, d, 2 * c) for s, d, c in EDGES]
    assert rows(result.df) == oracle("min", doubled)
    # a different sum tolerance changes the answer of a float sum: also another fingerprint
    interrupted(spark, QUERIES["sum"], directory)
    result = recsql.run(QUERIES["sum"], spark=spark, resume=True,
                        conf={**conf(directory), **ENDGAME, "spark.recsql.sumTolerance": "0.5"})
    assert iterations(result)[0] == 0


def test_checkpoint_of_other_input_data_is_refused(spark, graph, tmp_path):
    directory = tmp_path / "cp"
    interrupted(spark, QUERIES["min"], directory)
    changed = [(s, d, c) for s, d, c in EDGES if (s, d) != (7, 9)] + [(2, 12, 1)]
    graph(changed)  # same view name, same statement, new file
    result = recsql.run(QUERIES["min"], spark=spark, conf=conf(directory) | ENDGAME, resume=True)
    assert iterations(result)[0] == 0
    assert rows(result.df) == oracle("min", changed)


def test_checkpoint_of_in_memory_input_with_other_rows_is_refused(spark, tmp_path):
    directory = tmp_path / "cp"
    spark.createDataFrame(EDGES, "Src int, Dst int, Cost int").createOrReplaceTempView("g")
    try:
        interrupted(spark, QUERIES["set"], directory)
        fewer = [e for e in EDGES if e[:2] != (3, 5)]
        spark.createDataFrame(fewer, "Src int, Dst int, Cost int").createOrReplaceTempView("g")
        result = recsql.run(QUERIES["set"], spark=spark, conf=conf(directory) | ENDGAME, resume=True)
        assert iterations(result)[0] == 0
        assert rows(result.df) == oracle("set", fewer)
    finally:
        spark.catalog.dropTempView("g")


def test_checkpoint_without_manifest_or_with_a_foreign_fingerprint_is_not_used(
        spark, graph, tmp_path):
    directory = tmp_path / "cp"
    interrupted(spark, QUERIES["set"], directory)
    [where] = checkpoints(directory)
    manifest = where / recovery.MANIFEST
    text = manifest.read_text()
    manifest.write_text(text.replace('"fingerprint": "', '"fingerprint": "0'))
    result = recsql.run(QUERIES["set"], spark=spark, conf=conf(directory, limit=1000) |
                        {"spark.recsql.checkpointInterval": "0"} | ENDGAME, resume=True)
    assert iterations(result)[0] == 0 and rows(result.df) == oracle("set", EDGES)

    interrupted(spark, QUERIES["set"], directory)
    [where] = checkpoints(directory)
    (where / recovery.MANIFEST).unlink()  # as if the driver died while writing the checkpoint
    result = recsql.run(QUERIES["set"], spark=spark, conf=conf(directory) | ENDGAME, resume=True)
    assert iterations(result)[0] == 0 and rows(result.df) == oracle("set", EDGES)


def _fail_once_at(monkeypatch, iteration, how):
    original = GroupRun.materialize
    failed = []

    def materialize(self, cte, merged, at):
        if at == iteration and not failed:
            failed.append(at)
            how(self)
        return original(self, cte, merged, at)

    monkeypatch.setattr(GroupRun, "materialize", materialize)
    return failed


def _raise_lost(run):
    raise BlocksLost("CTE failed: [CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] simulated",
                              condition="CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND")


def _drop_local_checkpoint_blocks(run):
    """What an executor death does to `localCheckpoint`ed data: its blocks are gone (test-only
    JVM access: drop every persisted RDD, which holds the local checkpoints)."""
    sc = run.ctx.spark.sparkContext
    for rdd in list(sc._jsc.getPersistentRDDs().values()):
        rdd.unpersist(True)


@pytest.mark.parametrize("kind", ["sum", "bag"])
def test_lost_blocks_reload_the_latest_checkpoint(spark, graph, tmp_path, monkeypatch, kind):
    failed = _fail_once_at(monkeypatch, 9, _raise_lost)
    result = recsql.run(QUERIES[kind], spark=spark, conf=conf(tmp_path / "cp"))
    assert failed == [9]
    assert rows(result.df) == oracle(kind, EDGES)
    its = iterations(result)
    assert its.count(7) == 2 and its.count(8) == 2 and its.count(10) == 1  # redone from 6


def test_really_lost_local_checkpoints_are_recovered(spark, graph, tmp_path, monkeypatch):
    failed = _fail_once_at(monkeypatch, 9, _drop_local_checkpoint_blocks)
    result = recsql.run(QUERIES["min"], spark=spark, conf=conf(tmp_path / "cp"))
    assert failed == [9]
    assert rows(result.df) == oracle("min", EDGES)
    assert iterations(result).count(7) == 2


def test_lost_blocks_without_a_checkpoint_raise_the_clear_error(spark, graph, monkeypatch):
    _fail_once_at(monkeypatch, 9, _drop_local_checkpoint_blocks)
    with pytest.raises(recsql.RecSQLExecutionError, match="iteration 9") as caught:
        recsql.run(QUERIES["min"], spark=spark)
    assert "Py4J" not in str(caught.value)


def test_lost_blocks_retries_are_bounded(spark, graph, tmp_path, monkeypatch):
    original = GroupRun.materialize

    def always(self, cte, merged, at):
        if at == 9:
            _raise_lost(self)
        return original(self, cte, merged, at)

    monkeypatch.setattr(GroupRun, "materialize", always)
    with pytest.raises(BlocksLost):
        recsql.run(QUERIES["set"], spark=spark, conf=conf(tmp_path / "cp"))


DRIVER = textwrap.dedent("""
    import sys, recsql
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(sys.argv[1]).createOrReplaceTempView("g")
    conf = {"spark.recsql.checkpointDir": sys.argv[2], "spark.recsql.checkpointInterval": "5",
            "spark.recsql.endgame.enabled": "false"}
    recsql.run(open(sys.argv[3]).read(), spark=spark, conf=conf,
               progress=lambda s: print("iteration", s.iteration, flush=True))
    print("finished", flush=True)
""")


@pytest.mark.cluster  # a second driver JVM: 30-90 s on 2 cores
def test_driver_killed_mid_fixpoint_resumes_in_another_process(spark, tmp_path):
    """SIGKILL the driver process (and its JVM) once a checkpoint exists; resume here."""
    length = 50
    edges = [(i, i + 1, 1) for i in range(length)]
    data = tmp_path / "edges"
    spark.createDataFrame(edges, "Src int, Dst int, Cost int").coalesce(1).write.parquet(str(data))
    query = tmp_path / "q.sql"
    query.write_text(QUERIES["min"])
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    directory = tmp_path / "cp"
    driver = subprocess.Popen([sys.executable, str(script), str(data), str(directory), str(query)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and driver.poll() is None:
            done = [int(p.name[5:]) for p in checkpoints(directory)]
            if done and max(done) >= 15:
                break
            time.sleep(0.05)
        assert driver.poll() is None, "the driver ended before it could be killed"
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert "finished" not in driver.stdout.read()
    [where] = checkpoints(directory)
    killed_after = int(where.name[5:])
    assert killed_after < length

    spark.read.parquet(str(data)).createOrReplaceTempView("g")
    try:
        result = recsql.run(QUERIES["min"], spark=spark, resume=True,
                            conf={"spark.recsql.checkpointDir": str(directory),
                                  "spark.recsql.checkpointInterval": "5"})
        assert min(iterations(result)) == killed_after + 1
        assert rows(result.df) == [(i, i) for i in range(length + 1)]
    finally:
        spark.catalog.dropTempView("g")


def test_the_fingerprint_sees_an_insert_into_a_cached_table_a_view_also_reads(spark, tmp_path):
    """A relation of parquet files and a cached table lists only the files (`inputFiles()`): its
    identity must change when rows are inserted into the cached table, or a resume would continue
    from checkpoints of the rows before."""
    table = unique_name("rec_cached")
    files = str(tmp_path / "more")
    spark.createDataFrame([(1, 2)], "a int, b int").write.saveAsTable(table, format="parquet")
    spark.createDataFrame([(5, 6)], "a int, b int").write.parquet(files)
    spark.sql(f"CACHE TABLE {table}")
    try:
        before = recovery.relation_identity(spark.read.parquet(files).unionAll(spark.table(table)))
        spark.sql(f"INSERT INTO {table} VALUES (3, 4)")
        after = recovery.relation_identity(spark.read.parquet(files).unionAll(spark.table(table)))
        assert after != before
        # files alone (no cache in the plan) are still identified by their files, without a scan
        assert recovery.relation_identity(spark.read.parquet(files))[1][0].startswith("file:")
    finally:
        spark.sql(f"UNCACHE TABLE IF EXISTS {table}")
        spark.sql(f"DROP TABLE IF EXISTS {table}")
