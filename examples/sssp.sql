-- Single-source shortest paths from node 1: min() in the recursion keeps only the best cost
-- per node, so the fixpoint is reached as soon as no cost improves.
CREATE TEMP VIEW edge USING csv OPTIONS (path 'data/roads.csv', header 'true', inferSchema 'true');

WITH recursive path (Dst, min() AS Cost) AS
    (SELECT 1, 0)
  UNION
    (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path ORDER BY Dst;
