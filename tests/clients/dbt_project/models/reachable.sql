-- the nodes reachable from node 1: a recursive view (set recursion, ends on the seed's cycles)
{{ config(materialized='view') }}
WITH recursive reach (node) AS (SELECT 1)
  UNION (SELECT e.dst FROM reach, {{ ref('edges') }} e WHERE reach.node = e.src)
SELECT node FROM reach
