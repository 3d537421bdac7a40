-- Connected components: every node takes the smallest node id it is connected to.
CREATE TEMP VIEW friends USING csv OPTIONS (path 'data/friends.csv', header 'true', inferSchema 'true');
CREATE TEMP VIEW link AS SELECT A AS Src, B AS Dst FROM friends UNION SELECT B, A FROM friends;

-- The MIN in the recursive term is the CTE's min() aggregate (RaSQL: `cc (Node, min() AS Comp)`).
WITH RECURSIVE cc (Node, Comp) AS (
  SELECT Src, Src FROM link
  UNION
  SELECT link.Dst, MIN(cc.Comp) FROM cc, link WHERE cc.Node = link.Src GROUP BY link.Dst
)
SELECT Comp, count(*) AS Size, array_sort(collect_list(Node)) AS Members
FROM cc
GROUP BY Comp ORDER BY Comp;
