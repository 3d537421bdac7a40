-- Organisation size: how many people work under each manager (the employee counts itself).
CREATE TEMP VIEW report USING csv OPTIONS (path 'data/report.csv', header 'true', inferSchema 'true');

-- The SUM in the recursive term is the CTE's count() (RaSQL: `dept (Mgr, count() AS Cnt)`).
WITH RECURSIVE dept (Mgr, Cnt) AS (
  SELECT report.Emp, 1 FROM report
  UNION
  SELECT report.Mgr, SUM(dept.Cnt) FROM dept, report WHERE dept.Mgr = report.Emp GROUP BY report.Mgr
)
SELECT Mgr, Cnt FROM dept ORDER BY Mgr;
