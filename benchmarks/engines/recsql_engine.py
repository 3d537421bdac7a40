"""recsql itself, through its public contract:

    res = recsql.run(sql_text, spark=spark, conf={...}, edge=edges_df)   # + temp view `edge`
    res.df     -> pyspark DataFrame with the answer
    res.stats  -> per-iteration records: cte, iteration, delta_rows, total_rows, seconds,
                  join_strategy, ran_on
"""
from __future__ import annotations

from collections import Counter

from . import Engine, Outcome, Workload


class RecsqlEngine(Engine):
    spark_based = True

    def __init__(self, label: str, conf: dict[str, str]):
        """`conf` overrides recsql's settings for this engine ({} = recsql's defaults)."""
        self.name = f"recsql ({label})"
        self.conf = conf
        self.description = f"recsql.run on the shared SparkSession, conf={conf}" + (
            " (recsql defaults: endgame on, join side by vote)" if not conf else "")
        self._spark = None

    def unavailable(self):
        try:
            import recsql
        except Exception as ex:  # noqa: BLE001 - any import failure means "not there yet"
            return f"import recsql failed: {type(ex).__name__}: {ex}"
        if not callable(getattr(recsql, "run", None)):
            return "recsql imports but has no recsql.run(...) yet"
        return None

    def prepare(self, w: Workload):
        # recsql resolves bare table names through the session catalog and uses keyword
        # DataFrames for `{name}` placeholders; the queries say `edge`, so register both ways.
        w.edges.createOrReplaceTempView("edge")

    def run(self, w: Workload, deadline: float) -> Outcome:
        import recsql

        self._spark = w.spark
        res = recsql.run(w.query.sql(w.graph), spark=w.spark, conf=self.conf, edge=w.edges)
        answer = res.df.toArrow()
        stats = list(getattr(res, "stats", None) or [])
        places = Counter(str(getattr(s, "ran_on", "?")) for s in stats)
        strategies = Counter(str(getattr(s, "join_strategy", "?")) for s in stats)
        driver = sum(s.driver_seconds for s in stats if s.iteration > 0 and s.ran_on == "spark")
        jobs = sum(s.job_seconds for s in stats if s.iteration > 0 and s.ran_on == "spark")
        tail = sorted(s.seconds for s in stats if s.ran_on == "driver")
        lookups = sum(1 for s in stats if getattr(s, "lookup", False))
        lookup_note = f"; key lookups x{lookups}" if lookups else ""
        pulled = sum(s.pull_seconds for s in stats)
        tail_note = (f"; driver iterations: median {tail[len(tail) // 2]:.4f} s, max {tail[-1]:.4f} s"
                     f" (sum {sum(tail):.2f} s, of which the pull to the driver {pulled:.2f} s)"
                     if tail else "")
        return Outcome(
            answer=answer,
            iterations=len(stats) or None,
            iter_seconds=[float(s.seconds) for s in stats if getattr(s, "seconds", None) is not None],
            ran_on=", ".join(f"{k} x{v}" for k, v in places.most_common()),
            note=("joins: " + ", ".join(f"{k} x{v}" for k, v in strategies.most_common())
                  + f"; Spark iterations: driver {driver:.2f} s + jobs {jobs:.2f} s" + lookup_note + tail_note
                  if stats else ""),
        )

    def cancel(self):
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()
