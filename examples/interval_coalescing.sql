-- Interval coalescing: merge overlapping or touching intervals. Each merged interval starts at an
-- interval start no other interval covers; max() pushes its end as far as the overlaps reach.
CREATE TEMP VIEW inter USING csv OPTIONS (path 'data/intervals.csv', header 'true', inferSchema 'true');
CREATE TEMP VIEW lstart AS
  SELECT DISTINCT a.S AS T FROM inter a
  WHERE NOT EXISTS (SELECT 1 FROM inter b WHERE b.S < a.S AND a.S <= b.E);

-- The MAX in the recursive term is the CTE's max() aggregate (RaSQL: `coal (S, max() AS E)`).
WITH RECURSIVE coal (S, E) AS (
  SELECT lstart.T, inter.E FROM lstart, inter WHERE lstart.T = inter.S
  UNION
  SELECT coal.S, MAX(inter.E) FROM coal, inter WHERE coal.S <= inter.S AND inter.S <= coal.E
  GROUP BY coal.S
)
SELECT S, E FROM coal ORDER BY S;
