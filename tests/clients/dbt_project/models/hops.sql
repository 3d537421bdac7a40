-- the fewest edges from node 1 to each node: a recursive incremental model. On a later run
-- dbt-spark's insert_overwrite strategy builds a temporary view of this query and then runs
-- INSERT OVERWRITE ... SELECT from it
{{ config(materialized='incremental', incremental_strategy='insert_overwrite') }}
WITH recursive bfs (node, min() AS hops) AS (SELECT 1, 0)
  UNION (SELECT e.dst, bfs.hops + 1 FROM bfs, {{ ref('edges') }} e WHERE bfs.node = e.src)
SELECT node, hops FROM bfs
