-- Reachability: every airport reachable from LAX (set recursion, no aggregate).
CREATE TEMP VIEW flights USING csv OPTIONS (path 'data/flights.csv', header 'true', inferSchema 'true');

WITH RECURSIVE reach (Airport) AS (
  SELECT 'LAX'
  UNION
  SELECT f.Dst FROM reach r JOIN flights f ON r.Airport = f.Src
)
SELECT Airport FROM reach ORDER BY Airport;
