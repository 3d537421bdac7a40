-- Transitive closure of course prerequisites, written non-linearly: tc(X, Y) <- tc(X, Z), tc(Z, Y).
CREATE TEMP VIEW prereq USING csv OPTIONS (path 'data/prereqs.csv', header 'true', inferSchema 'true');

WITH RECURSIVE tc (Course, Needs) AS (
  SELECT Course, Prereq FROM prereq
  UNION
  SELECT a.Course, b.Needs FROM tc a, tc b WHERE a.Needs = b.Course
)
SELECT Course, Needs FROM tc ORDER BY Course, Needs;
