"""recsql on a real standalone cluster: a master and two one-core workers on 127.0.0.1, started
here from the installed pyspark's own launch classes, and a driver in a process of its own
(tests/cluster_driver.py: a Python process holds one SparkContext, and the suite's is local[2]).

Answers are checked against independent oracles (networkx, plain-Python fixpoints); the
executor-kill tests SIGKILL an executor JVM in the middle of a fixpoint. Marked `cluster`
(run: `python -m pytest -m cluster tests/test_cluster.py`)."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import networkx as nx
import oracles
import pytest

pytestmark = pytest.mark.cluster

SPARK_HOME = Path(__import__("pyspark").__file__).parent
DRIVER = Path(__file__).with_name("cluster_driver.py")
WORKERS = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------- the cluster

def launch(cls: str, args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """One daemon JVM in a process group of its own (its executors join the group)."""
    command = [str(SPARK_HOME / "bin" / "spark-class"), f"org.apache.spark.deploy.{cls}", *args]
    with log.open("w") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def master_state(webui: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=5) as response:
        return json.load(response)


def wait_for_workers(webui: int, daemons: list[subprocess.Popen], logs: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert all(d.poll() is None for d in daemons), _tails(logs)
        try:
            if master_state(webui).get("aliveworkers", 0) >= WORKERS:
                return
        except OSError:  # the master's UI is not up yet
            pass
        time.sleep(1)
    pytest.fail(f"{WORKERS} workers did not register within 120 s\n{_tails(logs)}")


def _tails(logs: Path) -> str:
    return "\n".join(f"== {p.name}\n{p.read_text()[-2000:]}" for p in sorted(logs.glob("*.log")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`spark://127.0.0.1:PORT` of a master with two registered workers (1 core, 2g each);
    every listener binds loopback. The daemons and their executors are killed at teardown."""
    base = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(base), "SPARK_NO_DAEMONIZE": "1"}
    port, webui = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    daemons = [launch("master.Master", ["--host", "127.0.0.1", "--port", str(port),
                                        "--webui-port", str(webui)], env, base / "master.log")]
    try:
        for k in range(WORKERS):
            work = base / f"worker{k}"
            work.mkdir()
            args = ["--host", "127.0.0.1", "--port", str(free_port()), "--cores", "1",
                    "--memory", "2g", "--webui-port", str(free_port()), "--work-dir", str(work),
                    master]
            daemons.append(launch("worker.Worker", args, {**env, "SPARK_WORKER_DIR": str(work)},
                                  base / f"worker{k}.log"))
        wait_for_workers(webui, daemons, base)
        yield master
    finally:
        for daemon in reversed(daemons):
            try:
                os.killpg(daemon.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            daemon.wait(30)


def drive(master: str, tmp_path: Path, tables: dict, queries: list[dict],
          timeout: float = 240) -> dict[str, dict]:
    """Run `queries` in a driver process on `master`; each query's outcome, by name."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"tables": tables, "queries": queries}))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(DRIVER.parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    driver = subprocess.Popen([sys.executable, str(DRIVER), master, str(job)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        out, err = driver.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        out, err = driver.communicate()
        pytest.fail(f"the driver did not finish within {timeout} s\n{out}\n{err[-4000:]}")
    assert driver.returncode == 0, f"{out}\n{err[-4000:]}"
    outcomes = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {o["name"]: o for o in outcomes}


def table(schema: str, rows) -> dict:
    return {"schema": schema, "rows": [list(r) for r in rows]}


# ------------------------------------------------------------------------------- same answers

def weighted_graph(nodes=30, edges=90, seed=7) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    pairs = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)}
    return sorted((a, b, rng.randint(1, 9)) for a, b in pairs if a != b)


def dag(nodes=16, seed=3) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return sorted({(a, b) for a in range(nodes) for b in range(a + 1, min(nodes, a + 4))
                   if rng.random() < 0.6})


UNDIRECTED = [(1, 2), (2, 3), (3, 1), (4, 5), (6, 7), (7, 8), (8, 9), (10, 11), (12, 12)]

ANSWER_QUERIES = {
    "sssp": """WITH recursive path (Dst, min() AS Cost) AS (SELECT 0, 0) UNION
                 (SELECT g.Dst, path.Cost + g.Cost FROM path, g WHERE path.Dst = g.Src)
               SELECT Dst, Cost FROM path""",
    "reach": """WITH recursive reach (Node) AS (SELECT 0) UNION
                  (SELECT g.Dst FROM reach, g WHERE reach.Node = g.Src)
                SELECT Node FROM reach""",
    "cc": """WITH RECURSIVE sym AS (SELECT A AS Src, B AS Dst FROM u UNION SELECT B, A FROM u),
               cc (Node, min() AS Comp) AS (SELECT Src, Src FROM sym
                 UNION SELECT sym.Dst, cc.Comp FROM cc JOIN sym ON cc.Node = sym.Src)
             SELECT Node, Comp FROM cc""",
    "paths": """WITH recursive paths (X, count() AS Cnt) AS (SELECT 0, 1)
                  UNION (SELECT d.B, paths.Cnt FROM paths, d WHERE paths.X = d.A)
                SELECT X, Cnt FROM paths""",
}


def expected_answers(weighted, dag_edges) -> dict[str, list[list]]:
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(weighted)
    return {
        "sssp": sorted([n, c] for n, c in nx.single_source_dijkstra_path_length(graph, 0).items()),
        "reach": sorted([n] for n in oracles.reachable([e[:2] for e in weighted], 0)),
        "cc": sorted(list(r) for r in oracles.min_label_components(UNDIRECTED)),
        "paths": sorted(list(r) for r in oracles.count_paths_dag(dag_edges, 0).items()),
    }


CHAIN = 40  # reachability on 0 -> 1 -> ... -> CHAIN: iterations 0 .. CHAIN + 1
INTERVAL = 5
KILLS = (12, 20)  # between two checkpoints; right before the checkpoint of 20 is written
RESTARTS = (11, 16)  # after the checkpoint of 10; of 15 (the one of 20 cannot be completed)
NOCP_KILL = 8
CHAIN_QUERY = """WITH recursive reach (Node) AS (SELECT 0) UNION
                   (SELECT chain.Dst FROM reach, chain WHERE reach.Node = chain.Src)
                 SELECT Node FROM reach"""


def chain_query(name: str, kill_at: tuple[int, ...], conf: dict) -> dict:
    return {"name": name, "sql": CHAIN_QUERY,
            "kill_at": list(kill_at), "conf": {"spark.recsql.endgame.enabled": "false", **conf}}


@pytest.fixture(scope="module")
def outcomes(cluster, tmp_path_factory) -> dict[str, dict]:
    """Every query of this module, run by ONE driver process (a driver and its executors take
    about a minute to start on two busy cores): the four answer queries, then the chain with
    executor kills, with and without a checkpoint directory."""
    work = tmp_path_factory.mktemp("driver")
    weighted, dag_edges = weighted_graph(), dag()
    tables = {"g": table("Src int, Dst int, Cost int", weighted),
              "u": table("A int, B int", UNDIRECTED), "d": table("A int, B int", dag_edges),
              "chain": table("Src int, Dst int, Cost int", [(i, i + 1, 1) for i in range(CHAIN)])}
    queries = [{"name": name, "sql": sql} for name, sql in ANSWER_QUERIES.items()]
    queries.append(chain_query("kill", KILLS, {
        "spark.recsql.checkpointDir": str(work / "cp"),
        "spark.recsql.checkpointInterval": str(INTERVAL)}))
    queries.append(chain_query("nocp", (NOCP_KILL,), {}))
    found = drive(cluster, work, tables, queries, timeout=600)
    print({name: (o["seconds"], o.get("iterations")) for name, o in found.items()})  # with -s
    found["expected"] = expected_answers(weighted, dag_edges)
    found["checkpoint_dir"] = work / "cp"
    return found


@pytest.mark.parametrize("name", sorted(ANSWER_QUERIES))
def test_answers_on_a_standalone_cluster_match_the_oracles(outcomes, name):
    outcome = outcomes[name]
    assert "error" not in outcome, outcome
    assert outcome["rows"] == outcomes["expected"][name]
    assert outcome["iterations"][0] == 0 and not outcome["killed"]


# ------------------------------------------------------------------------------- executor kill

def restarts(iterations: list[int]) -> list[int]:
    """The iteration numbers the stats go back to: where a run continued from a checkpoint."""
    return [b for a, b in itertools.pairwise(iterations) if b <= a]


def test_executor_killed_mid_fixpoint_reloads_the_latest_checkpoint(outcomes):
    outcome = outcomes["kill"]
    assert len(outcome["killed"]) == len(KILLS), "no executor JVM of the application was found"
    assert "error" not in outcome, outcome
    assert outcome["rows"] == [[n] for n in range(CHAIN + 1)]
    its = outcome["iterations"]
    # each kill loses the in-memory state: the run continues after the checkpoint before it
    assert restarts(its) == list(RESTARTS), its
    assert its[-1] == CHAIN + 1 and sorted(set(its)) == list(range(CHAIN + 2))
    recovered = [w for w in outcome["warnings"] if "continuing from the checkpoint" in w]
    assert len(recovered) == len(KILLS), outcome["warnings"]
    assert not any(outcomes["checkpoint_dir"].iterdir())  # the completed statement cleaned up


def test_executor_killed_without_a_checkpoint_dir_fails_clearly(outcomes):
    """Without reliable checkpoints there is nothing to reload: the lost blocks are reported
    as the failure of the next iteration, not a hang and not a JVM stack trace."""
    outcome = outcomes["nocp"]
    assert outcome["killed"]
    error = outcome["error"]
    assert error["type"] == "BlocksLost", error
    assert f"iteration {NOCP_KILL + 1}" in error["message"] and "Py4J" not in error["message"]
