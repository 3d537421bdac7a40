-- downstream of the recursive table, view and incremental models (not recursive itself)
{{ config(materialized='table') }}
SELECT r.node, s.cost, h.hops
FROM {{ ref('reachable') }} r
JOIN {{ ref('shortest_paths') }} s ON s.dst = r.node
JOIN {{ ref('hops') }} h ON h.node = r.node
