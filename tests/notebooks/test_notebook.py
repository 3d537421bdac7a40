"""examples/notebook.ipynb executed headless in a real IPython kernel (nbclient), then a few more
cells in the same kernel: a kernel interrupt in the middle of a fixpoint, and bad input. The
answers are checked against oracles computed here (networkx, plain Python) from the example's
own data files, the displays against what a person should read."""

from __future__ import annotations

import csv
import re

import nbformat
import networkx as nx
import pytest
from nbformat.v4 import new_code_cell
from oracles import dijkstra_predecessors, routes

from tests.notebooks.kernel import EXAMPLES, execute, interrupt, progress, wait_for_progress

NOTEBOOK = EXAMPLES / "notebook.ipynb"
ERRS = {"tags": ["raises-exception"]}
# one kernel and its Spark start, the example, an interrupted fixpoint and the bad input: about
# a minute on a quiet machine
pytestmark = pytest.mark.timeout(1200)

# A chain of 100,000 edges: hundreds of Spark iterations, interrupted after the third
INTERRUPTED = (
    "%%recsql -c spark.recsql.endgame.enabled=false -c spark.recsql.maxIterations=1000000\n"
    "WITH RECURSIVE reach (X) AS (SELECT 0)\n"
    "  UNION (SELECT chain.Dst FROM reach, chain WHERE reach.X = chain.Src)\n"
    "SELECT count(*) FROM reach")
AFTER_INTERRUPT = (
    "import time\n"
    "tracker = spark.sparkContext.statusTracker()\n"
    "deadline = time.time() + 60\n"
    "while tracker.getActiveJobsIds() and time.time() < deadline:\n"
    "    time.sleep(0.2)\n"
    "print('active jobs:', list(tracker.getActiveJobsIds()), 'rows:', spark.range(7).count())")
BAD = {
    "option": "%%recsql --frobnicate\nSELECT 1",
    "missing": "%%recsql\nSELECT * FROM metro\nWHERE Src = {nowhere}",
    "syntax": ("%%recsql\nCREATE OR REPLACE TEMP VIEW ran_anyway AS SELECT 1 AS x;\n"
               "WITH RECURSIVE r (x) AS (SELECT 1) UNION (SELECT x + 1 FROM r WHERE x <) SELECT * FROM r"),
    # `{source}` is filled in before the statement runs: the caret must still sit under the
    # cell's own `Minute`, on the same line
    "mapped": ("%%recsql\nWITH RECURSIVE trip (Stop, min() AS Minutes) AS (SELECT {source}, 0) UNION "
               "(SELECT metro.Dst, trip.Minute + metro.Minutes FROM trip, metro WHERE trip.Stop = metro.Src) "
               "SELECT * FROM trip"),
}


@pytest.fixture(scope="module")
def executed():
    """The example, then the extra cells, in one kernel; the cells by their source."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells += [
        new_code_cell("spark.range(0, 100000).selectExpr('id AS Src', 'id + 1 AS Dst')"
                      ".createOrReplaceTempView('chain')"),
        new_code_cell(INTERRUPTED, metadata=ERRS),
        new_code_cell(AFTER_INTERRUPT),
        new_code_cell("%recsql SELECT count(*) AS n FROM chain"),
        *[new_code_cell(source, metadata=ERRS) for source in BAD.values()],
        new_code_cell("print('ran_anyway exists:', spark.catalog.tableExists('ran_anyway'))"),
    ]
    execute(notebook, watchers={INTERRUPTED: _interrupt_after_three_iterations})
    return {cell.source: cell for cell in notebook.cells if cell.cell_type == "code"}


def _interrupt_after_three_iterations(cell, client) -> None:
    wait_for_progress(cell, r"reach iteration 3\b")
    interrupt(client)  # regardless: should the display never show it, the test fails, not hangs


def cell(executed, start: str):
    found = [c for source, c in executed.items() if source.startswith(start)]
    assert len(found) == 1, start
    return found[0]


def table(cell, index: int = -1) -> list[list[str]]:
    """The rows of the cell's `index`-th result table (its text form: columns two spaces apart)."""
    tables = [o["data"]["text/plain"] for o in cell.outputs
              if "text/html" in o.get("data", {}) and "recsql-rows" in o["data"]["text/html"]]
    lines = tables[index].splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines[1:-1]]


def error(cell) -> dict:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    return errors[0]


def caret(traceback: list[str], under: str) -> tuple[str, str]:
    """The line holding `under` and the caret line right after it."""
    lines = "\n".join(traceback).splitlines()
    index = next(i for i, line in enumerate(lines) if under in line and not line.startswith("\x1b"))
    return lines[index], lines[index + 1]


def data(name: str) -> list[dict[str, str]]:
    with open(EXAMPLES / "data" / name, newline="") as stream:
        return list(csv.DictReader(stream))


def test_the_example_is_committed_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_shortest_routes_match_dijkstra(executed):
    edges = [(int(r["Src"]), int(r["Dst"]), int(r["Minutes"])) for r in data("metro.csv")]
    best = dijkstra_predecessors(edges, 1, (1,))
    walks = routes({node: pred for node, (_, pred) in best.items()}, 1)
    expected = [[str(n), str(best[n][0]), "[" + ", ".join(map(str, walks[n])) + "]"] for n in sorted(best)]
    sssp = cell(executed, "%%recsql -o trips")
    assert table(sssp) == expected
    assert cell(executed, "trips.count()").outputs[0]["data"]["text/plain"] == str(len(expected))


def test_the_progress_display_ends_with_the_last_iterations(executed):
    """Its final state: done, the last iteration converged (0 delta rows), and its rows are the
    last of the --stats table: every iteration reached the display, the driver's included."""
    sssp = cell(executed, "%%recsql -o trips")
    shown = progress(sssp)
    assert shown.startswith("recsql: done in ")
    assert re.search(r"route iteration \d+ on \w+: 0 delta rows, 42 rows", shown.splitlines()[0])
    live = [line.split() for line in shown.splitlines() if re.match(r"\s+(trip|route)\s", line)]
    stats = [o["data"]["text/plain"] for o in sssp.outputs if "recsql-stats" in o.get("data", {}).get("text/html", "")
             and not o["data"]["text/plain"].startswith("recsql")]
    final = [line.split() for line in stats[-1].splitlines()[1:]]
    assert live == final[-len(live):] and final[-1][2] == "0"
    assert {"driver", "spark"} >= {row[5] for row in final}
    assert any(o.get("data", {}).get("image/png") for o in sssp.outputs)  # --plot


def test_org_chart_depth_first(executed):
    children: dict[int, list[int]] = {}
    for r in data("report.csv"):
        children.setdefault(int(r["Mgr"]), []).append(int(r["Emp"]))
    expected = []

    def walk(manager: int, depth: int) -> None:
        for emp in sorted(children.get(manager, [])):
            expected.append([str(emp), str(manager), str(depth)])
            walk(emp, depth + 1)

    walk(10, 1)
    assert table(cell(executed, "%%recsql\nWITH RECURSIVE chart")) == expected


def test_filtered_view_and_its_plan(executed):
    graph = nx.DiGraph()
    graph.add_weighted_edges_from((int(r["Src"]), int(r["Dst"]), int(r["Minutes"])) for r in data("metro.csv"))
    lengths = nx.single_source_dijkstra_path_length(graph, 3)
    expected = [[str(n), str(d)] for n, d in sorted(lengths.items()) if n != 3]
    assert table(cell(executed, "%%recsql\nCREATE OR REPLACE TEMP VIEW fastest")) == expected
    plan = cell(executed, "%recsql --explain")
    text = [o["data"]["text/plain"] for o in plan.outputs if "recsql-plan" in o.get("data", {}).get("text/html", "")]
    assert "demand: pushed Src = 3 into the base branches of fastest__trip" in text[0]


def test_a_mistake_shows_the_caret_under_the_cells_text(executed):
    mistake = error(cell(executed, "%%recsql\nWITH RECURSIVE trip (Stop, min() AS Minutes) AS (\n"))
    assert mistake.ename == "CellError" and "Traceback" not in "\n".join(mistake.traceback)
    line, marks = caret(mistake.traceback, "trip.Minute +")
    assert marks == "-" * line.index("Minute +") + "^" * len("Minute")
    # after `{source}` (8 characters) became `1` on the same line
    mapped = error(cell(executed, BAD["mapped"]))
    line, marks = caret(mapped.traceback, "trip.Minute +")
    assert marks == "-" * line.index("Minute +") + "^" * len("Minute")


def test_a_kernel_interrupt_cancels_the_fixpoint_and_the_session_stays_usable(executed):
    interrupted = cell(executed, INTERRUPTED)
    stopped = error(interrupted)
    assert stopped.ename == "Interrupted", (stopped.ename, stopped.evalue, stopped.traceback)
    assert stopped.traceback == ["\x1b[1;33mKeyboardInterrupt: recsql cancelled the cell's Spark jobs; "
                                 "the session is usable\x1b[0m"]
    logged = "".join(o.get("text", "") for o in interrupted.outputs if o.output_type == "stream")
    assert "Traceback" not in logged and "KeyboardInterrupt" not in logged  # Py4J's log is quiet
    assert progress(interrupted).startswith("recsql: interrupted after")
    after = cell(executed, AFTER_INTERRUPT).outputs[0]["text"]
    assert after.strip() == "active jobs: [] rows: 7"
    assert table(cell(executed, "%recsql SELECT count(*) AS n FROM chain")) == [["100000"]]


def test_bad_input(executed):
    # IPython prints a UsageError as one line on stderr, without a traceback; the cell fails
    usage = cell(executed, BAD["option"]).outputs
    assert [o.output_type for o in usage] == ["stream"]
    assert usage[0]["text"].startswith("UsageError: unknown option --frobnicate; usage: %%recsql [-o NAME")
    assert usage[0]["text"].count("\n") == 1
    missing = error(cell(executed, BAD["missing"]))
    line, marks = caret(missing.traceback, "{nowhere}")
    assert "{nowhere} names no variable of the notebook: define nowhere = ..." in missing.traceback[0]
    assert marks == "-" * line.index("{nowhere}") + "^" * len("{nowhere}")
    syntax = error(cell(executed, BAD["syntax"]))
    assert "PARSE_SYNTAX_ERROR" in syntax.traceback[0]
    assert not [o for o in cell(executed, BAD["syntax"]).outputs if o.output_type == "display_data"]
    assert cell(executed, "print('ran_anyway").outputs[0]["text"].strip() == "ran_anyway exists: False"
