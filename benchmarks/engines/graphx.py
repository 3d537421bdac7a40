"""GraphX, the library a Spark user would pick instead of recsql for SSSP and connected components.

`graphx.scala` runs in the `spark-shell` that pyspark ships (GraphX's jar is in pyspark/jars),
in one process of its own for the whole benchmark (local[2], the session's driver memory and
shuffle partitions), so its JIT warms up over the check run as the shared session's does. Two
engines share that process:

* `GraphX (build + run)`: every run builds the graph (parquet to an edge RDD, `Graph.fromEdges`,
  `EdgePartition2D`, cached), runs the query, and drops the graph: what a first statement costs;
* `GraphX (run, graph built)`: runs the query on the graph its check run built and kept: what
  every later query over the same graph costs.

Timed by GraphX itself (the build and the run apart, both in the note), so the figures exclude
the request's round trip and writing the answer for the check. A run ends with the answer
computed, cached in Spark and counted, as in `shared/baselines/graphx_anchor.scala`; it is not
fetched to the driver, which the recsql engines' figures include (`toArrow()`).

CC: GraphX reads the directed edge list and treats it as undirected (`connectedComponents()`);
the other engines read the symmetric table, built before any timing.
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from . import Engine, Outcome, TimedOut, Workload

SCRIPT = Path(__file__).with_name("graphx.scala")


class GraphXProcess:
    """The spark-shell running graphx.scala, and the request files it reads."""

    def __init__(self, master: str, driver_memory: str, shuffle_partitions: str) -> None:
        import pyspark

        self.dir = Path(tempfile.mkdtemp(prefix="recsql-graphx-"))
        shell = Path(pyspark.__file__).parent / "bin" / "spark-shell"
        self.log = open(self.dir / "spark-shell.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(shell), "--master", master, "--driver-memory", driver_memory,
             "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
             "--conf", f"spark.sql.shuffle.partitions={shuffle_partitions}", "-i", str(SCRIPT)],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "REQUESTS": str(self.dir)}, start_new_session=True)
        self.next = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, line: str, deadline: float) -> list[str]:
        """Send one request; its answer's words after `ok`. Raises TimedOut past `deadline`
        (monotonic seconds) and RuntimeError on an error or a dead process."""
        n, self.next = self.next, self.next + 1
        tmp = self.dir / f"req-{n}.tmp"
        tmp.write_text(line)
        tmp.rename(self.dir / f"req-{n}")
        resp = self.dir / f"resp-{n}"
        while not resp.exists():
            if not self.alive():
                tail = (self.dir / "spark-shell.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"spark-shell exited ({self.proc.returncode}): {tail}")
            if time.monotonic() > deadline:
                os.killpg(self.proc.pid, signal.SIGKILL)  # a run past its cap takes no request
                self.stop()
                raise TimedOut(0, 0.0, "GraphX killed at its cap")
            time.sleep(0.02)
        kind, _, rest = resp.read_text().partition(" ")
        if kind != "ok":
            raise RuntimeError(f"GraphX: {rest[:500]}")
        return rest.split()

    def stop(self) -> None:
        """Ask the script to exit; kill its process group (the shell script and the JVM it
        starts, in a session of their own) if it has not within a few seconds."""
        if self.alive():
            n, self.next = self.next, self.next + 1
            (self.dir / f"req-{n}.tmp").write_text("exit")
            (self.dir / f"req-{n}.tmp").rename(self.dir / f"req-{n}")
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


_process: GraphXProcess | None = None


def process(w: Workload) -> GraphXProcess:
    """The running GraphX process, started with the shared session's settings if there is none."""
    global _process
    if _process is None or not _process.alive():
        conf = w.spark.conf
        _process = GraphXProcess(conf.get("spark.master"), conf.get("spark.driver.memory", "8g"),
                                 conf.get("spark.sql.shuffle.partitions"))
        atexit.register(_process.stop)
    return _process


class GraphXEngine(Engine):
    def __init__(self, warm: bool) -> None:
        self.warm = warm
        self.name = "GraphX (run, graph built)" if warm else "GraphX (build + run)"
        self.description = (
            "GraphX 4.3 through spark-shell -i (engines/graphx.scala), its own local[2] process: "
            + ("Pregel SSSP / connectedComponents() on the graph its check run built and cached"
               if warm else "build the graph (EdgePartition2D, cached), then Pregel SSSP / "
               "connectedComponents(), then drop it") + "; CC reads the directed edges")
        self._proc: GraphXProcess | None = None

    def unavailable(self) -> str | None:
        import pyspark

        shell = Path(pyspark.__file__).parent / "bin" / "spark-shell"
        jars = list((Path(pyspark.__file__).parent / "jars").glob("spark-graphx_*.jar"))
        return None if shell.exists() and jars else "pyspark has no spark-shell or GraphX jar"

    def cannot(self, w: Workload) -> str | None:
        return None if w.query.name in ("sssp", "cc") else "the GraphX anchor covers SSSP and CC"

    def prepare(self, w: Workload) -> None:
        self._proc = process(w)

    def run(self, w: Workload, deadline: float) -> Outcome:
        import pyarrow.parquet as pq

        from .. import graphs

        proc = self._proc = process(w)
        name = w.graph.name.removesuffix("-sym") if w.query.name == "cc" else w.graph.name
        edges = graphs.load(name).parquet()
        out = proc.dir / f"answer-{self.warm}"
        build, run = (float(x) for x in proc.request(
            f"{'warm' if self.warm else 'cold'} {w.query.name} {edges} {w.graph.source} {out}",
            deadline))
        answer = pq.read_table(out)
        return Outcome(answer=answer, seconds=run if self.warm else build + run,
                       ran_on="GraphX (spark-shell, local[2])",
                       note=f"build {build:.2f} s, run {run:.2f} s"
                            + ("; graph built by an earlier run" if self.warm and not build else ""))

    def cancel(self) -> None:
        if self._proc is not None and self._proc.alive():
            os.killpg(self._proc.proc.pid, signal.SIGKILL)

    def cleanup(self, w: Workload) -> None:
        if self.warm and self._proc is not None and self._proc.alive():
            self._proc.request("drop", time.monotonic() + 300)
