-- Organisation size: how many people work under each manager (the employee counts itself).
CREATE TEMP VIEW report USING csv OPTIONS (path 'data/report.csv', header 'true', inferSchema 'true');

WITH recursive dept (Mgr, count() AS Cnt) AS
    (SELECT report.Emp, 1 FROM report)
  UNION
    (SELECT report.Mgr, dept.Cnt FROM dept, report WHERE dept.Mgr = report.Emp)
SELECT Mgr, Cnt FROM dept ORDER BY Mgr;
