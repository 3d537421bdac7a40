-- Declared aggregates: each role's permission bits are its own grants OR'ed with those of every
-- role it inherits from, at any depth. The bitwise or is declared once as a head aggregate
-- (CREATE AGGREGATE, checked when declared: commutative, associative, idempotent, identity 0);
-- Spark's own bit_or() would do here too, undeclared.
CREATE TEMP VIEW grants USING csv OPTIONS (path 'data/grants.csv', header 'true', inferSchema 'true');
CREATE TEMP VIEW inherits USING csv OPTIONS (path 'data/inherits.csv', header 'true', inferSchema 'true');

CREATE OR REPLACE TEMPORARY AGGREGATE bor(a BIGINT, b BIGINT) RETURNS BIGINT IDENTITY 0 RETURN a | b;

WITH RECURSIVE rights (Role, bor() AS Bits) AS (
  SELECT Role, Bits FROM grants
  UNION
  SELECT i.Role, r.Bits FROM rights r JOIN inherits i ON r.Role = i.Parent
)
SELECT Role, Bits FROM rights ORDER BY Role;

-- The same in the Spark grammar: the recursive term calls the aggregate with the value.
WITH RECURSIVE rights (Role, Bits) AS (
  SELECT Role, Bits FROM grants
  UNION
  SELECT i.Role, bor(r.Bits) FROM rights r JOIN inherits i ON r.Role = i.Parent GROUP BY i.Role
)
SELECT Role, Bits FROM rights ORDER BY Role;
