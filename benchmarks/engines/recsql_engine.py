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

    def __init__(self, endgame: bool | None):
        """endgame None = recsql's default settings (conf={}); True/False set it explicitly."""
        self.endgame = endgame
        if endgame is None:
            self.name = "recsql (default settings)"
            self.description = "recsql.run on the shared SparkSession, conf={} (recsql defaults)"
        else:
            self.name = f"recsql (endgame {'on' if endgame else 'off'})"
            self.description = ("recsql.run on the shared SparkSession, conf={"
                                f"'spark.recsql.endgame.enabled': '{str(endgame).lower()}'}}")
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
        conf = {} if self.endgame is None else {
            "spark.recsql.endgame.enabled": "true" if self.endgame else "false"}
        res = recsql.run(w.query.sql(w.graph), spark=w.spark, conf=conf, edge=w.edges)
        answer = res.df.toArrow()
        stats = list(getattr(res, "stats", None) or [])
        places = Counter(str(getattr(s, "ran_on", "?")) for s in stats)
        strategies = Counter(str(getattr(s, "join_strategy", "?")) for s in stats)
        return Outcome(
            answer=answer,
            iterations=len(stats) or None,
            iter_seconds=[float(s.seconds) for s in stats if getattr(s, "seconds", None) is not None],
            ran_on=", ".join(f"{k} x{v}" for k, v in places.most_common()),
            note="joins: " + ", ".join(f"{k} x{v}" for k, v in strategies.most_common()) if stats else "",
        )

    def cancel(self):
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()
