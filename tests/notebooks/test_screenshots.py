"""The notebook as a person sees it: executed in a real kernel, rendered to HTML by nbconvert,
photographed by headless Chromium (`apt-get install chromium`). Marker `slow` (minutes: a
2^16-vertex RMAT shortest-path fixpoint on the Spark loop). With RECSQL_SCREENSHOTS=DIR the
pictures are also written there (the ones under docs/ were made so):

    RECSQL_SCREENSHOTS=docs python -m pytest -m slow tests/notebooks/test_screenshots.py

- notebook-example.png: examples/notebook.ipynb after a run;
- notebook-live.png: the RMAT cell while its fixpoint runs (a Spark stage inside an iteration);
- notebook-rmat16.png: the same cell once done, with its convergence plot.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path

import nbformat
import networkx as nx
import pytest
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_notebook
from PIL import Image, ImageChops

from benchmarks.graphs import rmat
from tests.notebooks.kernel import EXAMPLES, ROOT, execute, progress, wait_for_progress

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

RMAT_SSSP = (
    "%%recsql -c spark.recsql.endgame.enabled=false --plot\n"
    "WITH RECURSIVE path (Dst, min() AS Cost) AS (\n"
    "  SELECT 1, 0\n"
    "  UNION\n"
    "  SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src\n"
    ")\n"
    "SELECT count(*) AS reached, max(Cost) AS farthest FROM path")


def photograph(notebook, path: Path, width: int = 1100) -> Image.Image:
    """The notebook rendered by nbconvert and photographed by headless Chromium, cropped to its
    content."""
    html = HTMLExporter(template_name="lab").from_notebook_node(notebook)[0]
    page = path.with_suffix(".html")
    page.write_text(html)
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},6000", f"--screenshot={path}", page.as_uri()],
                   check=True, capture_output=True, timeout=300)
    image = Image.open(path).convert("RGB")
    content = ImageChops.difference(image, Image.new("RGB", image.size, "white")).getbbox()
    assert content is not None, f"{path} is blank"
    image = image.crop((0, 0, width, min(image.height, content[3] + 20)))
    image.save(path)
    keep = os.environ.get("RECSQL_SCREENSHOTS")
    if keep:
        shutil.copy(path, Path(keep) / path.name)
    return image


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_the_example_notebook_rendered(tmp_path):
    notebook = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    execute(notebook)
    html = HTMLExporter(template_name="lab").from_notebook_node(notebook)[0]
    # what a person should read: the rows, the progress display's final state, the plot, the caret
    assert "recsql-rows" in html and "recsql: done in" in html and "image/png" in html
    assert "-------------------------^^^^^^" in html
    image = photograph(notebook, tmp_path / "notebook-example.png")
    assert image.height > 2000  # every section rendered, not an error page


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_a_long_fixpoint_as_it_runs(tmp_path):
    """RMAT 2^16 single-source shortest paths on the Spark loop: photographed while a Spark
    stage of an iteration runs, and once done; its answer against networkx's Dijkstra."""
    graph = rmat(16)
    notebook = new_notebook(cells=[
        new_code_cell("import recsql\n"
                      "spark = recsql.session()\n"
                      f"spark.read.parquet({str(graph.parquet().relative_to(ROOT))!r})"
                      ".createOrReplaceTempView('edge')\n"
                      "%load_ext recsql"),
        new_code_cell(RMAT_SSSP),
    ])
    snapshot = {}

    def photograph_while_running(cell, client) -> None:
        if wait_for_progress(cell, r"recsql: running .*iteration [3-9]", 1200) and \
                wait_for_progress(cell, r"Spark stage \d+: \d+/\d+ tasks", 600):
            snapshot["live"] = copy.deepcopy(notebook)

    execute(notebook, cwd=ROOT, watchers={RMAT_SSSP: photograph_while_running}, driver_memory="2g")
    done = notebook.cells[1]
    text = progress(done)
    assert text.startswith("recsql: done in") and " on spark: 0 delta rows" in text.splitlines()[0]
    digraph = nx.DiGraph()
    digraph.add_weighted_edges_from(zip(graph.src.tolist(), graph.dst.tolist(), graph.w.tolist()))
    lengths = nx.single_source_dijkstra_path_length(digraph, 1)
    rows = [o["data"]["text/plain"] for o in done.outputs if "recsql-rows" in o.get("data", {}).get("text/html", "")]
    assert rows[0].splitlines()[1].split() == [str(len(lengths)), str(max(lengths.values()))]
    assert "live" in snapshot, "never saw a Spark stage inside a running iteration"
    assert "Spark stage" in progress(snapshot["live"].cells[1])
    photograph(snapshot["live"], tmp_path / "notebook-live.png")
    photograph(notebook, tmp_path / "notebook-rmat16.png")
