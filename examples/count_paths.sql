-- Count the distinct paths from node 1 to every node of a DAG: a node's count is the sum of its
-- predecessors' counts, so each path contributes once.
CREATE TEMP VIEW rc USING csv OPTIONS (path 'data/dag.csv', header 'true', inferSchema 'true');

-- The SUM in the recursive term is the CTE's count() (RaSQL: `paths (X, count() AS Cnt)`).
WITH RECURSIVE paths (X, Cnt) AS (
  SELECT 1, 1
  UNION
  SELECT rc.B, SUM(paths.Cnt) FROM paths, rc WHERE paths.X = rc.A GROUP BY rc.B
)
SELECT X, Cnt FROM paths ORDER BY X;
