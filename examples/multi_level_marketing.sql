-- Multi-level marketing: a member earns 10% of its own sales and half of each recruit's bonus.
CREATE TEMP VIEW sales USING csv OPTIONS (path 'data/sales.csv', header 'true', inferSchema 'true');
CREATE TEMP VIEW sponsor USING csv OPTIONS (path 'data/sponsor.csv', header 'true', inferSchema 'true');

-- The SUM in the recursive term is the CTE's sum() (RaSQL: `bonus (M, sum() AS B)`).
WITH RECURSIVE bonus (M, B) AS (
  SELECT M, P * 0.1 FROM sales
  UNION
  SELECT sponsor.M1, SUM(bonus.B * 0.5) FROM bonus, sponsor WHERE bonus.M = sponsor.M2
  GROUP BY sponsor.M1
)
SELECT M, B FROM bonus ORDER BY M;
