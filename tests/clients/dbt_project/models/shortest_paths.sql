-- single-source shortest paths from node 1: a recursive table model in RaSQL's head spelling
{{ config(materialized='table') }}
WITH recursive path (dst, min() AS cost) AS (SELECT 1, 0)
  UNION (SELECT e.dst, path.cost + e.cost FROM path, {{ ref('edges') }} e WHERE path.dst = e.src)
SELECT dst, cost FROM path
