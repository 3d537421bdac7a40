"""recsql from Python: `recsql.sql` works like `spark.sql`, and DataFrames passed as keyword
arguments fill `{name}` placeholders (values such as the start node are formatted in).

    python examples/python_api.py
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession

import recsql

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

SHORTEST_PATHS = """
WITH RECURSIVE path (Dst, Cost) AS (
  SELECT {source}, 0
  UNION
  SELECT e.Dst, MIN(path.Cost + e.Cost) FROM path, {edges} AS e WHERE path.Dst = e.Src GROUP BY e.Dst
)
SELECT Dst, Cost FROM path ORDER BY Dst
"""

ORGANISATION_SIZE = """
WITH RECURSIVE dept (Mgr, Cnt) AS (
  SELECT r.Emp, 1 FROM {report} AS r
  UNION
  SELECT r.Mgr, SUM(dept.Cnt) FROM dept, {report} AS r WHERE dept.Mgr = r.Emp GROUP BY r.Mgr
)
SELECT Mgr, Cnt FROM dept WHERE Cnt > :least ORDER BY Cnt DESC, Mgr
"""


def read_csv(spark: SparkSession, name: str) -> DataFrame:
    return spark.read.csv(os.path.join(DATA, name), header=True, inferSchema=True)


def shortest_paths(spark: SparkSession, source: int = 1) -> DataFrame:
    return recsql.sql(SHORTEST_PATHS, spark=spark, edges=read_csv(spark, "roads.csv"),
                      source=source)


def big_teams(spark: SparkSession, least: int = 1) -> DataFrame:
    return recsql.sql(ORGANISATION_SIZE, args={"least": least}, spark=spark,
                      report=read_csv(spark, "report.csv"))


def main() -> None:
    spark = recsql.session()
    print("Shortest paths from node 1:")
    shortest_paths(spark).show()
    print("Managers with more than one person in their organisation:")
    big_teams(spark).show()
    result = recsql.run(SHORTEST_PATHS, spark=spark, edges=read_csv(spark, "roads.csv"), source=1)
    print(f"The fixpoint took {max(s.iteration for s in result.stats)} iterations.")


if __name__ == "__main__":
    main()
