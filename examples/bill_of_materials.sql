-- Bill of materials: a part can be delivered when its slowest basic sub-part arrives.
CREATE TEMP VIEW assembly USING csv OPTIONS (path 'data/assembly.csv', header 'true', inferSchema 'true');
CREATE TEMP VIEW basic USING csv OPTIONS (path 'data/basic.csv', header 'true', inferSchema 'true');

WITH recursive waitfor (Part, max() AS Days) AS
    (SELECT Part, Days FROM basic)
  UNION
    (SELECT assembly.Part, waitfor.Days FROM assembly, waitfor WHERE assembly.Sub = waitfor.Part)
SELECT Part, Days FROM waitfor ORDER BY Days DESC, Part;
