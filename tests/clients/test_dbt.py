"""dbt-core 1.11 with dbt-spark 1.11 (`method: thrift`) against `recsql serve`: a seed, recursive
`table`, `view` and `incremental` (`insert_overwrite`) models, a model downstream of them, schema
tests and `docs generate`, the whole sequence twice. Answers are read back with PyHive on new
connections and compared with networkx on the seed's CSV."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.clients import oracles
from tests.clients.venvs import venv

pytestmark = [pytest.mark.clients, pytest.mark.timeout(2400)]  # the first test pays for the set-up

PROJECT = Path(__file__).parent / "dbt_project"
SCHEMA = "analytics"
COMMANDS = (("seed",), ("run",), ("test",), ("docs", "generate"))
# poll_interval: dbt-spark polls a running statement every 5 s by default (whole seconds only)
PROFILE = """recsql:
  target: dev
  outputs:
    dev:
      type: spark
      method: thrift
      host: 127.0.0.1
      port: {port}
      user: analyst
      schema: {schema}
      threads: 1
      connect_retries: 0
      poll_interval: 1
"""


@dataclass
class Invocation:
    command: str
    returncode: int
    output: str
    results: dict = field(default_factory=dict)  # node -> status, from target/run_results.json

    def explain(self) -> str:
        return f"dbt {self.command} exited {self.returncode}:\n{self.output[-6000:]}"


@dataclass
class DbtRuns:
    project: Path
    rounds: list[dict[str, Invocation]]
    log: str  # logs/dbt.log: every statement dbt sent, with its node


@pytest.fixture(scope="module")
def dbt(recsql_server, tmp_path_factory) -> DbtRuns:
    """seed, run, test, docs generate; twice. Every command runs whatever the previous did."""
    dbt_bin = venv("dbt") / "bin" / "dbt"
    project = tmp_path_factory.mktemp("dbt") / "project"
    shutil.copytree(PROJECT, project)
    (project / "profiles.yml").write_text(PROFILE.format(port=recsql_server.port, schema=SCHEMA))
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DBT_USE_COLORS": "false",
           "DBT_PROFILES_DIR": str(project), "DBT_PROJECT_DIR": str(project)}
    env.pop("PYTHONPATH", None)
    rounds = []
    for _ in range(2):
        done = {}
        for command in COMMANDS:
            finished = subprocess.run([str(dbt_bin), *command], cwd=project, env=env, capture_output=True,
                                      text=True, timeout=900)
            results_file = project / "target" / "run_results.json"
            results = {}
            if results_file.exists():
                results = {r["unique_id"]: r["status"] for r in json.loads(results_file.read_text())["results"]}
                results_file.unlink()
            done[" ".join(command)] = Invocation(" ".join(command), finished.returncode,
                                                 finished.stdout + finished.stderr, results)
        rounds.append(done)
    return DbtRuns(project, rounds, (project / "logs" / "dbt.log").read_text())


def invocations(dbt: DbtRuns, command: str) -> list[Invocation]:
    return [done[command] for done in dbt.rounds]


def node_status(dbt: DbtRuns, command: str, node: str) -> list[str]:
    return [i.results.get(node, "absent") for i in invocations(dbt, command)]


def statements(dbt: DbtRuns, node: str) -> list[str]:
    """The SQL dbt sent for `node`, in order (from dbt.log's debug lines)."""
    pattern = re.compile(rf"On {re.escape(node)}: (.*?)(?=\n\S*\d\d:\d\d:\d\d\.\d+ )", re.S)
    sent = [re.sub(r"/\* \{.*?\} \*/", "", s).strip() for s in pattern.findall(dbt.log)]
    return [s for s in sent if s not in ("ROLLBACK", "Close")]  # dbt's bookkeeping, not sent


def test_seed_twice(dbt, recsql_server):
    for invocation in invocations(dbt, "seed"):
        assert invocation.returncode == 0, invocation.explain()
    rows = recsql_server.query(f"SELECT src, dst, cost FROM {SCHEMA}.edges")
    assert sorted(rows) == sorted(oracles.edges())


@pytest.mark.parametrize("command", ["run", "test", "docs generate"])
def test_command_passes_twice(dbt, command):
    for invocation in invocations(dbt, command):
        assert invocation.returncode == 0, invocation.explain()


def test_recursive_table_model(dbt, recsql_server):
    assert node_status(dbt, "run", "model.recsql_clients.shortest_paths") == ["success"] * 2
    assert sorted(recsql_server.query(f"SELECT dst, cost FROM {SCHEMA}.shortest_paths")) \
        == oracles.shortest_paths()


def test_recursive_view_model_from_a_new_connection(dbt, recsql_server):
    assert node_status(dbt, "run", "model.recsql_clients.reachable") == ["success"] * 2
    assert sorted(recsql_server.query(f"SELECT node FROM {SCHEMA}.reachable")) == oracles.reachable()
    assert sorted(recsql_server.query("SELECT node FROM reachable", database=SCHEMA)) == oracles.reachable()


def test_recursive_incremental_model_by_insert_overwrite(dbt, recsql_server):
    node = "model.recsql_clients.hops"
    assert node_status(dbt, "run", node) == ["success"] * 2
    assert sorted(recsql_server.query(f"SELECT node, hops FROM {SCHEMA}.hops")) == oracles.hops()
    # the second run took the incremental path: a temporary view of the recursive query, then
    # INSERT OVERWRITE from it (not a second CREATE TABLE)
    sent = [s.lower() for s in statements(dbt, node)]
    view = [i for i, s in enumerate(sent) if re.match(r"create (or replace )?temporary view \S*hops__dbt_tmp", s)]
    insert = [i for i, s in enumerate(sent) if s.startswith(f"insert overwrite table {SCHEMA}.hops")]
    assert view and insert and view[-1] < insert[-1], "\n---\n".join(sent)
    assert "with recursive bfs" in sent[view[-1]] and "hops__dbt_tmp" in sent[insert[-1]]


def test_model_downstream_of_the_recursive_ones(dbt, recsql_server):
    assert node_status(dbt, "run", "model.recsql_clients.node_summary") == ["success"] * 2
    costs, hops = dict(oracles.shortest_paths()), dict(oracles.hops())
    expected = sorted((node, costs[node], hops[node]) for node, in oracles.reachable())
    assert sorted(recsql_server.query(f"SELECT node, cost, hops FROM {SCHEMA}.node_summary")) == expected


def test_schema_tests_pass_twice(dbt):
    for invocation in invocations(dbt, "test"):
        assert invocation.results and set(invocation.results.values()) == {"pass"}, invocation.explain()
        assert len(invocation.results) == 10


def test_docs_catalog_lists_the_models_with_columns(dbt):
    catalog = json.loads((dbt.project / "target" / "catalog.json").read_text())
    columns = {node.split(".")[-1]: sorted(c.lower() for c in entry["columns"])
               for node, entry in catalog["nodes"].items()}
    assert columns == {"edges": ["cost", "dst", "src"], "shortest_paths": ["cost", "dst"],
                       "reachable": ["node"], "hops": ["hops", "node"],
                       "node_summary": ["cost", "hops", "node"]}
