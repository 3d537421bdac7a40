"""The careful hand-written PySpark loop: the strongest baseline a PySpark user would write.

This is the loop of `shared/baselines/careful_loop.py` (the project's reference baseline), carried
in the repository so the suite needs nothing outside it: semi-naive, per iteration one join +
groupBy for the candidates, a left join to keep the improved ones, a full-outer (SSSP) or left
(CC) merge into the state, `localCheckpoint()` of the new delta and the new state, a `count()` to
stop. The edge table is the cached one every Spark engine gets. SSSP and CC only, as the baseline.
"""
from __future__ import annotations

import time

from pyspark.sql import functions as F

from . import Outcome, SparkEngine, TimedOut, Workload


def _persist(df):
    return df.localCheckpoint(eager=True)


class CarefulLoop(SparkEngine):
    name = "careful loop"
    description = ("shared/baselines/careful_loop.py: join + groupBy, left join for the improved "
                   "rows, full-outer/left merge, localCheckpoint of delta and state, count()")

    def cannot(self, w: Workload) -> str | None:
        return None if w.query.name in ("sssp", "cc") else "the baseline covers SSSP and CC"

    def run(self, w: Workload, deadline: float) -> Outcome:
        self._spark = w.spark
        e = w.edges.select(F.col("Src").alias("src"), F.col("Dst").alias("dst"),
                           F.col("Cost").alias("cost"))
        times: list[float] = []
        if w.query.name == "sssp":
            val = "d"
            state = _persist(w.spark.createDataFrame([(w.graph.source, 0)], "v long, d long"))
        else:
            val = "l"
            state = _persist(e.select(F.col("src").alias("v")).distinct()
                             .select("v", F.col("v").alias("l")))
        delta = state
        while True:
            t0 = time.perf_counter()
            x = delta.alias("x").join(e.alias("e"), F.col("x.v") == F.col("e.src"))
            if w.query.name == "sssp":
                cand = x.groupBy(F.col("e.dst").alias("v")).agg(
                    F.min(F.col("x.d") + F.col("e.cost")).alias("d"))
                old = state.withColumnRenamed("d", "old")
                new = _persist(cand.join(old, "v", "left")
                               .where(F.col("old").isNull() | (F.col("d") < F.col("old")))
                               .select("v", "d"))
                how = "full"
            else:
                cand = x.groupBy(F.col("e.dst").alias("v")).agg(F.min("x.l").alias("l"))
                old = state.withColumnRenamed("l", "old")
                new = _persist(cand.join(old, "v").where(F.col("l") < F.col("old"))
                               .select("v", "l"))
                how = "left"
            n = new.count()
            if n:
                nv = new.withColumnRenamed(val, "n_" + val)
                state = _persist(state.join(nv, "v", how)
                                 .select("v", F.coalesce("n_" + val, val).alias(val)))
            times.append(time.perf_counter() - t0)
            if n == 0:
                break
            delta = new
            if time.monotonic() > deadline:
                raise TimedOut(len(times), sum(times))
        return Outcome(answer=state.select("v", val).toArrow(), iterations=len(times),
                       iter_seconds=times, ran_on=f"spark x{len(times)}")
