-- Bill of materials: a part can be delivered when its slowest basic sub-part arrives.
CREATE TEMP VIEW assembly USING csv OPTIONS (path 'data/assembly.csv', header 'true', inferSchema 'true');
CREATE TEMP VIEW basic USING csv OPTIONS (path 'data/basic.csv', header 'true', inferSchema 'true');

-- The MAX in the recursive term is the CTE's max() aggregate (RaSQL's compact form: the head
-- `waitfor (Part, max() AS Days)` and the term without MAX and GROUP BY).
WITH RECURSIVE waitfor (Part, Days) AS (
  SELECT Part, Days FROM basic
  UNION
  SELECT assembly.Part, MAX(waitfor.Days) FROM assembly, waitfor WHERE assembly.Sub = waitfor.Part
  GROUP BY assembly.Part
)
SELECT Part, Days FROM waitfor ORDER BY Days DESC, Part;
