"""Spark 4.3's own recursive CTE (`spark.sql("WITH RECURSIVE ...")`).

What it can express, as checked against Spark 4.3.0:
* only `UNION ALL` between anchor and recursive term (`UNION` raises
  UNION_NOT_SUPPORTED_IN_RECURSIVE_CTE), so nothing is deduplicated during the recursion: one row
  per *path*, and a cyclic graph never terminates;
* no aggregate over the recursive reference (INVALID_RECURSIVE_REFERENCE.PLACE), so min/count
  cannot be pushed into the recursion.
Hence it runs only on acyclic graphs, enumerating paths and aggregating afterwards (DISTINCT for
reach/TC, MIN for SSSP/APSP, COUNT(*) for path counts). Connected components need a symmetric,
hence cyclic, graph and are never expressible. A depth bound (`WHERE depth < k`) would make cyclic
queries terminate but the number of rows (walks) grows exponentially with k, so it is not used.
The recursion limits are lifted for these runs: spark.sql.cteRecursionLevelLimit=-1 and
spark.sql.cteRecursionRowLimit=-1.
"""
from __future__ import annotations

from . import Outcome, SparkEngine, Workload

SQL = {
    "reach": "WITH RECURSIVE r(X) AS (SELECT CAST({s} AS BIGINT) UNION ALL "
             "SELECT e.Dst FROM r JOIN edge e ON r.X = e.Src) SELECT DISTINCT X FROM r",
    "sssp": "WITH RECURSIVE p(Dst, Cost) AS (SELECT CAST({s} AS BIGINT), CAST(0 AS BIGINT) UNION ALL "
            "SELECT e.Dst, p.Cost + e.Cost FROM p JOIN edge e ON p.Dst = e.Src) "
            "SELECT Dst, MIN(Cost) FROM p GROUP BY Dst",
    "tc": "WITH RECURSIVE tc(A, B) AS (SELECT Src, Dst FROM edge UNION ALL "
          "SELECT tc.A, e.Dst FROM tc JOIN edge e ON tc.B = e.Src) SELECT DISTINCT A, B FROM tc",
    "apsp": "WITH RECURSIVE ap(A, B, C) AS (SELECT Src, Dst, Cost FROM edge UNION ALL "
            "SELECT ap.A, e.Dst, ap.C + e.Cost FROM ap JOIN edge e ON ap.B = e.Src) "
            "SELECT A, B, MIN(C) FROM ap GROUP BY A, B",
    "cpaths": "WITH RECURSIVE cp(X) AS (SELECT CAST({s} AS BIGINT) UNION ALL "
              "SELECT e.Dst FROM cp JOIN edge e ON cp.X = e.Src) SELECT X, COUNT(*) FROM cp GROUP BY X",
}
LIMITS = {"spark.sql.cteRecursionLevelLimit": "-1", "spark.sql.cteRecursionRowLimit": "-1"}


class SparkNativeEngine(SparkEngine):
    name = "Spark WITH RECURSIVE"
    description = ("Spark 4.3 SQL recursive CTE, UNION ALL, path enumeration then aggregate; "
                   "acyclic graphs only")

    def cannot(self, w: Workload):
        q = w.query.name
        if q == "cc":
            return "CC needs a symmetric (cyclic) graph; UNION ALL only, no dedup"
        if q not in SQL:
            return f"no native form for {q}"
        if not w.graph.acyclic:
            return ("the graph has cycles and Spark allows only UNION ALL "
                    "(no dedup, no aggregate in the recursion), so it would not terminate")
        return None

    def prepare(self, w: Workload):
        for k, v in LIMITS.items():
            w.spark.conf.set(k, v)
        w.edges.createOrReplaceTempView("edge")

    def run(self, w: Workload, deadline: float) -> Outcome:
        self._spark = w.spark
        answer = w.spark.sql(SQL[w.query.name].format(s=w.graph.source)).toArrow()
        return Outcome(answer=answer, ran_on="spark (one recursive CTE)")
