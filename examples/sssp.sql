-- Single-source shortest paths from node 1: MIN in the recursion keeps only the best cost
-- per node, so the fixpoint is reached as soon as no cost improves.
CREATE TEMP VIEW edge USING csv OPTIONS (path 'data/roads.csv', header 'true', inferSchema 'true');

-- The MIN in the recursive term is the CTE's min() aggregate (RaSQL's compact form: the head
-- `path (Dst, min() AS Cost)` and the term without MIN and GROUP BY).
WITH RECURSIVE path (Dst, Cost) AS (
  SELECT 1, 0
  UNION
  SELECT edge.Dst, MIN(path.Cost + edge.Cost) FROM path, edge WHERE path.Dst = edge.Src GROUP BY edge.Dst
)
SELECT Dst, Cost FROM path ORDER BY Dst;
