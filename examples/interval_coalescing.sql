-- Interval coalescing: merge overlapping or touching intervals. Each merged interval starts at an
-- interval start no other interval covers; max() pushes its end as far as the overlaps reach.
CREATE TEMP VIEW inter USING csv OPTIONS (path 'data/intervals.csv', header 'true', inferSchema 'true');
CREATE TEMP VIEW lstart AS
  SELECT DISTINCT a.S AS T FROM inter a
  WHERE NOT EXISTS (SELECT 1 FROM inter b WHERE b.S < a.S AND a.S <= b.E);

WITH recursive coal (S, max() AS E) AS
    (SELECT lstart.T, inter.E FROM lstart, inter WHERE lstart.T = inter.S)
  UNION
    (SELECT coal.S, inter.E FROM coal, inter WHERE coal.S <= inter.S AND inter.S <= coal.E)
SELECT S, E FROM coal ORDER BY S;
