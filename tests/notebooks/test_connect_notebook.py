"""The magic on Spark Connect: a real IPython kernel with SPARK_REMOTE set and no session of its
own, so the magic opens a Connect session; the answer against networkx, the live display's
final state, and a mistake's caret. The server is the session's (`connect_server`, tests/conftest.py)."""

from __future__ import annotations

import networkx as nx
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.api.test_connect import EDGES
from tests.notebooks.kernel import execute, progress

# A second kernel and a Connect server: with `-m slow`, so the default suite keeps its 20
# minutes; the magic's classic path runs in test_notebook.py, recsql over Connect in
# tests/api/test_connect.py.
pytestmark = [pytest.mark.timeout(1200), pytest.mark.slow]

SSSP = ("%%recsql -o paths\n"
        "WITH recursive path (Dst, min() AS Cost) AS (SELECT {source}, 0) UNION\n"
        "  (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)\n"
        "SELECT Dst, Cost FROM path ORDER BY Dst")


def test_a_cell_over_spark_connect(connect_server, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_REMOTE", connect_server)
    notebook = new_notebook(cells=[
        new_code_cell("%load_ext recsql\nsource = 1"),
        new_code_cell(SSSP),
        new_code_cell("from pyspark.sql import SparkSession\n"
                      "print(type(SparkSession.getActiveSession()).__module__)"),
        new_code_cell("%%recsql\nSELECT Dst, Cst FROM edge", metadata={"tags": ["raises-exception"]}),
    ])
    edges = ", ".join(f"({s}, {d}, {c})" for s, d, c in EDGES)
    notebook.cells.insert(1, new_code_cell(
        f"%%recsql\nCREATE OR REPLACE TEMP VIEW edge AS SELECT * FROM VALUES {edges} AS t(Src, Dst, Cost)"))
    execute(notebook, cwd=tmp_path)
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(EDGES)
    expected = sorted(nx.single_source_dijkstra_path_length(graph, 1).items())
    sssp = notebook.cells[2]
    rows = [o["data"]["text/plain"] for o in sssp.outputs if "recsql-rows" in o.get("data", {}).get("text/html", "")]
    assert [tuple(map(int, line.split())) for line in rows[0].splitlines()[1:-1]] == expected
    assert progress(sssp).startswith("recsql: done in")
    assert notebook.cells[3].outputs[0]["text"].strip() == "pyspark.sql.connect.session"
    mistake = [o for o in notebook.cells[4].outputs if o.output_type == "error"][0]
    assert "Cst" in mistake.traceback[0] and "^^^" in "\n".join(mistake.traceback)
