-- Same generation: two people are of the same generation if they are siblings, or if their
-- parents are of the same generation.
CREATE TEMP VIEW parent USING csv OPTIONS (path 'data/parent.csv', header 'true', inferSchema 'true');

WITH RECURSIVE sg (X, Y) AS (
  SELECT a.Child, b.Child FROM parent a, parent b WHERE a.Parent = b.Parent AND a.Child <> b.Child
  UNION
  SELECT a.Child, b.Child FROM parent a, sg, parent b WHERE a.Parent = sg.X AND b.Parent = sg.Y
)
SELECT X, Y FROM sg ORDER BY X, Y;
