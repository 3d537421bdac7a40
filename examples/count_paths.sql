-- Count the distinct paths from node 1 to every node of a DAG: count() sums what the branch
-- projects, so each path contributes once.
CREATE TEMP VIEW rc USING csv OPTIONS (path 'data/dag.csv', header 'true', inferSchema 'true');

WITH recursive paths (X, count() AS Cnt) AS
    (SELECT 1, 1)
  UNION
    (SELECT rc.B, paths.Cnt FROM paths, rc WHERE paths.X = rc.A)
SELECT X, Cnt FROM paths ORDER BY X;
