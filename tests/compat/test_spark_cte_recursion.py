"""recsql against Spark's own WITH RECURSIVE, statement by statement.

The statements are written from what Spark 4.3's test input `sql-tests/inputs/cte-recursion.sql`
exercises (Spark's file, not ours: its newest version, and the older version's statements that it
dropped), plus the forms of recursion Spark's SQL reference teaches (a hierarchy, a graph walk,
LIMIT, a level cap). Spark's native evaluation in the same session is the oracle: where Spark
answers, recsql must give the same rows (as a multiset), on the default path and on the Spark
loop. Where Spark refuses, recsql refuses with a RecSQLError, or answers by
one of its documented extensions (docs/dialect.md), checked against a plain-Python fixpoint.
"""

from __future__ import annotations

from collections import Counter

import pytest

import recsql
from recsql import RecSQLError

SPARK_LOOP = {"spark.recsql.endgame.enabled": "false"}

ANSWERED = {
    "basic": "WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r WHERE level < 10) "
             "SELECT * FROM r",
    "string": "WITH RECURSIVE r(c) AS (SELECT 'a' UNION ALL SELECT c || ' b' FROM r WHERE LENGTH(c) < 10) "
              "SELECT * FROM r",
    "aggregate_anchor": "WITH RECURSIVE r(level, data) AS (SELECT MAX(level) AS level, SUM(data) AS data "
                        "FROM VALUES (0, 1), (0, 2) AS v(level, data) UNION ALL SELECT level + 1, data FROM r "
                        "WHERE level < 10) SELECT * FROM r ORDER BY level",
    "count_over": "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL SELECT level + 1, data FROM r "
                  "WHERE level < 10) SELECT COUNT(*) FROM r",
    "distinct_term": "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL SELECT DISTINCT level + 1, "
                     "data FROM r WHERE level < 10) SELECT * FROM r",
    "values_alias": "WITH RECURSIVE y AS (VALUES (1) AS t(id)), x AS (SELECT * FROM y UNION ALL "
                    "SELECT id + 1 FROM x WHERE id < 5) SELECT * FROM x",
    "two_recursions": "WITH RECURSIVE x AS (VALUES (1) AS t(id) UNION ALL SELECT id + 1 FROM x WHERE id < 5), "
                      "y AS (VALUES (1) AS t(id) UNION ALL SELECT id + 1 FROM y WHERE id < 10) "
                      "SELECT * FROM y LEFT JOIN x ON x.id = y.id",
    "reads_other": "WITH RECURSIVE x AS (VALUES (1) AS t(id) UNION ALL SELECT id + 1 FROM x WHERE id < 5), "
                   "y AS (VALUES (1) AS t(id) UNION ALL SELECT id + 1 FROM x WHERE id < 10) "
                   "SELECT * FROM y LEFT JOIN x ON x.id = y.id",
    "star_seed": "WITH RECURSIVE x AS (SELECT 1 AS id UNION ALL SELECT id + 1 FROM x WHERE id < 3), "
                 "y AS (SELECT * FROM x UNION ALL SELECT * FROM x), "
                 "z AS (SELECT * FROM x UNION ALL SELECT id + 1 FROM z WHERE id < 10) SELECT * FROM z",
    "star_seed_2": "WITH RECURSIVE x AS (SELECT 1 AS id UNION ALL SELECT id + 1 FROM x WHERE id < 3), "
                   "y AS (SELECT * FROM x UNION ALL SELECT * FROM x), "
                   "z AS (SELECT * FROM y UNION ALL SELECT id + 1 FROM z WHERE id < 10) SELECT * FROM z",
    "two_anchors": "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL VALUES (0, 'B') UNION ALL "
                   "SELECT level + 1, data || 'C' FROM r WHERE level < 3) SELECT * FROM r",
    "name_collision_2": "WITH RECURSIVE r(level) AS ((WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL "
                        "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r) UNION ALL "
                        "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r",
    "self_join_union_all": "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL SELECT r1.level + 1, "
                           "r1.data FROM r AS r1 JOIN r AS r2 ON r2.data = r1.data WHERE r1.level < 10) "
                           "SELECT * FROM r",
    "self_join_growing": "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A'), (0, 'A'), (0, 'B') UNION ALL "
                         "SELECT r1.level + 1, r2.data FROM r AS r1 JOIN r AS r2 ON r2.data = r1.data "
                         "WHERE r1.level < 3) SELECT * FROM r",
    # 10 levels, as its siblings: a level limit keeps every iteration on Spark on both paths
    # (limits.py), so each level more is a Spark iteration more, and 50 checked nothing 10 does not
    "max_recursion_level": "WITH RECURSIVE r(level) MAX RECURSION LEVEL 200 AS (VALUES (0) UNION ALL "
                           "SELECT level + 1 FROM r WHERE level < 10) SELECT count(*) FROM r",
    "limit": "WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r) SELECT * FROM r LIMIT 10",
    "limit_projected": "WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r) "
                       "SELECT level, level FROM r LIMIT 10",
    "nested_in_with": "WITH t AS (WITH RECURSIVE s AS (VALUES (1) AS t(i) UNION ALL SELECT i + 1 FROM s) "
                      "SELECT i AS j FROM s LIMIT 10) SELECT * FROM t",
    "with_in_term": "WITH RECURSIVE outermost AS (SELECT 0 AS level UNION ALL (WITH innermost AS "
                    "(SELECT * FROM outermost) SELECT level + 1 FROM innermost WHERE level < 5)) "
                    "SELECT * FROM outermost",
    "nested_recursion": "WITH RECURSIVE t AS (WITH RECURSIVE s AS (VALUES (1) AS t(i) UNION ALL "
                        "SELECT i + 1 FROM s WHERE i < 10) SELECT i AS j FROM s UNION ALL "
                        "SELECT j + 1 FROM t WHERE j < 10) SELECT * FROM t",
    "name_collision": "WITH RECURSIVE r(level) AS (WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL "
                      "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r UNION ALL "
                      "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r",
    "left_join_base": "WITH RECURSIVE r(level, id) AS (VALUES (0, 0) UNION ALL SELECT level + 1, t.id FROM r "
                      "LEFT JOIN cte_t AS t ON t.id = r.level WHERE level < 10) "
                      "SELECT * FROM r AS r1 JOIN r AS r2 ON r1.id = r2.id + 1 AND r1.level = r2.level + 1",
    "cycles_arrays": "WITH RECURSIVE destinations_from_new_york AS (SELECT 'New York' AS destination, "
                     "ARRAY('New York') AS path, 0 AS length UNION ALL SELECT r.destination, "
                     "CONCAT(d.path, ARRAY(r.destination)), d.length + 1 FROM cte_routes AS r "
                     "JOIN destinations_from_new_york AS d ON d.destination = r.origin "
                     "AND NOT ARRAY_CONTAINS(d.path, r.destination)) SELECT * FROM destinations_from_new_york",
    "fibonacci": "WITH RECURSIVE fibonacci AS (VALUES (0, 1) AS t(a, b) UNION ALL SELECT b, a + b "
                 "FROM fibonacci WHERE a < 10) SELECT a FROM fibonacci ORDER BY a",
}

# Spark's newer statements and its documentation's forms (on both paths too; most of them run on
# Spark either way: a LIMIT that ends the recursion, and forms off the driver's allowlist).
ANSWERED_NEWER = {
    "alias_anchor": "WITH RECURSIVE r AS (SELECT 0 AS level UNION ALL SELECT level + 1 FROM r WHERE level < 9) "
                    "SELECT * FROM r",
    "bare_values": "WITH RECURSIVE r(level) AS (VALUES 0 UNION ALL SELECT level + 1 FROM r WHERE level < 9) "
                   "SELECT * FROM r",
    "string_functions": "WITH RECURSIVE r(c) AS (SELECT 'a' UNION ALL SELECT c || char(ascii(substr(c, -1)) + 1) "
                        "FROM r WHERE LENGTH(c) < 10) SELECT * FROM r",
    "limit_stops_row_growth": "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT next FROM t "
                              "LEFT JOIN cte_zero_one ON n = current) "
                              "SELECT count(*), min(n), max(n) FROM (SELECT * FROM t LIMIT 60)",
    "no_self_reference": "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT 2) SELECT * FROM t",
    "with_in_term_star": "WITH RECURSIVE t1 AS (SELECT 1 AS level UNION ALL (WITH t2 AS (SELECT level + 1 FROM t1 "
                         "WHERE level < 10) SELECT * FROM t2)) SELECT * FROM t1",
    "shadows_outer_cte": "WITH t1 AS (SELECT 1), t2 AS (WITH RECURSIVE t1 AS (SELECT 1 AS level UNION ALL "
                         "(WITH t3 AS (SELECT level + 1 FROM t1 WHERE level < 10) SELECT * FROM t3)) "
                         "SELECT * FROM t1) SELECT * FROM t2",
    "left_join_left_side": "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, r.data "
                           "FROM r LEFT OUTER JOIN (SELECT 0 AS data) AS t ON t.data = r.data WHERE r.level < 9) "
                           "SELECT * FROM r",
    "right_join_right_side": "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, r.data "
                             "FROM (SELECT 0 AS data) AS t RIGHT OUTER JOIN r ON r.data = t.data "
                             "WHERE r.level < 9) SELECT * FROM r",
    "semi_join_left_side": "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, r.data "
                           "FROM r LEFT SEMI JOIN (SELECT 0 AS data) AS t ON t.data = r.data WHERE r.level < 9) "
                           "SELECT * FROM r",
    "anti_join_left_side": "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, r.data "
                           "FROM r LEFT ANTI JOIN (SELECT -1 AS data) AS t ON t.data = r.data WHERE r.level < 9) "
                           "SELECT * FROM r",
    "two_recursions_joined": "WITH RECURSIVE r1 AS (SELECT 0 AS level UNION ALL SELECT level + 1 FROM r1 "
                             "WHERE level < 9), r2 AS (SELECT 10 AS level UNION ALL SELECT level + 1 FROM r2 "
                             "WHERE level < 19) SELECT * FROM r1 JOIN r2 ON r2.level = r1.level + 10",
    "self_join_after": "WITH RECURSIVE r AS (SELECT 0 AS level UNION ALL SELECT level + 1 FROM r WHERE level < 9) "
                       "SELECT * FROM r AS r1 JOIN r AS r2 ON r2.level = r1.level",
    "nested_as_anchor": "WITH RECURSIVE r2 AS (WITH RECURSIVE r1 AS (SELECT 0 AS innerlevel UNION ALL "
                        "SELECT innerlevel + 1 FROM r1 WHERE innerlevel < 3) SELECT 0 AS outerlevel, innerlevel "
                        "FROM r1 UNION ALL SELECT outerlevel + 1, innerlevel FROM r2 WHERE outerlevel < 3) "
                        "SELECT * FROM r2",
    "nested_head_aliases": "WITH RECURSIVE r2(outerlevel1, innerlevel1) AS (WITH RECURSIVE r1 AS (SELECT 0 AS "
                           "innerlevel UNION ALL SELECT innerlevel + 1 FROM r1 WHERE innerlevel < 3) SELECT 0 AS "
                           "outerlevel, innerlevel FROM r1 UNION ALL SELECT outerlevel1 + 1, innerlevel1 FROM r2 "
                           "WHERE outerlevel1 < 3) SELECT * FROM r2",
    "unused_columns_limit": "WITH RECURSIVE t1(a, b, c) AS (SELECT 1, 1, 1 UNION ALL SELECT a + 1, a + 1, a + 1 "
                            "FROM t1) SELECT a FROM t1 LIMIT 5",
    "cross_join_limit": "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT next FROM t CROSS JOIN cte_bits) "
                        "SELECT * FROM t LIMIT 63",
    "cross_join_set_cte": "WITH RECURSIVE x(id) AS (SELECT 1 UNION SELECT 2), t(id, xid) AS (SELECT 0 AS id, "
                          "0 AS xid UNION ALL SELECT t.id + 1, xid * 10 + x.id FROM t CROSS JOIN x WHERE t.id < 3) "
                          "SELECT * FROM t",
    "reads_other_comma": "WITH RECURSIVE t1(a, b) AS (SELECT 1, 1 UNION ALL SELECT a + b, a FROM t1 WHERE a < 20), "
                         "t2(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t2, t1 WHERE n + 1 = a) SELECT * FROM t2",
    "two_ctes_in_term": "WITH RECURSIVE t1 (n) AS (VALUES (1) UNION ALL (WITH t2(j) AS (SELECT n + 1 FROM t1), "
                        "t3(k) AS (SELECT j FROM t2) SELECT k FROM t3 WHERE k <= 5)) SELECT n FROM t1",
    "anchor_reads_cte_twice": "WITH RECURSIVE tmp(x) AS (VALUES (1), (2), (3), (4), (5)), rcte(x, y, z, t) AS "
                              "(SELECT x, x, x, x FROM tmp WHERE x = 1 UNION ALL SELECT x + 1, x, y + 1, y FROM rcte "
                              "WHERE x < 5) SELECT * FROM rcte",
    "anchor_wider_type": "WITH RECURSIVE t1(n, m) AS (SELECT 1, CAST(1 AS BIGINT) UNION ALL SELECT n + 1, n + 1 "
                         "FROM t1 WHERE n < 5) SELECT * FROM t1",
    "nulls_limit": "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT CASE WHEN n < 5 THEN n + 1 ELSE NULL END "
                   "FROM t1) SELECT * FROM t1 LIMIT 25",
    "limited_and_full_reads": "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t1 WHERE n < 5) "
                              "SELECT (SELECT SUM(n) FROM (SELECT * FROM t1)), "
                              "(SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 3))",
    "two_limited_reads": "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t1) "
                         "SELECT (SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 5)), "
                         "(SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 3))",
    "limited_reads_in_recursion": "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t1), t2(m) AS "
                                  "(SELECT (SELECT SUM(n) FROM (SELECT n FROM t1 LIMIT 10) AS sums) UNION ALL "
                                  "SELECT m + (SELECT SUM(n) FROM (SELECT n FROM t1 LIMIT 3) AS sums) FROM t2) "
                                  "SELECT * FROM t2 LIMIT 20",
    "limit_over_union_all": "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t1) "
                            "((SELECT n FROM t1) UNION ALL (SELECT n FROM t1)) LIMIT 20",
    # the forms of Spark's SQL reference (WITH RECURSIVE): a hierarchy, a graph walk, LIMIT, a level cap
    "doc_hierarchy": "WITH RECURSIVE reports(id, name, manager_id, depth) AS (SELECT id, name, manager_id, 0 "
                     "FROM cte_employees WHERE manager_id IS NULL UNION ALL SELECT e.id, e.name, e.manager_id, "
                     "r.depth + 1 FROM cte_employees AS e JOIN reports AS r ON e.manager_id = r.id) "
                     "SELECT * FROM reports ORDER BY depth, id",
    "doc_graph_reach": "WITH RECURSIVE reach(node, path) AS (SELECT 'New York', ARRAY('New York') UNION ALL "
                       "SELECT r.destination, array_append(reach.path, r.destination) FROM reach "
                       "JOIN cte_routes AS r ON r.origin = reach.node WHERE NOT array_contains(reach.path, "
                       "r.destination)) SELECT node, count(*) AS paths, max(size(path)) AS longest FROM reach "
                       "GROUP BY node",
    "doc_graph_limit": "WITH RECURSIVE walk(node, steps) AS (SELECT 'New York', 0 UNION ALL SELECT r.destination, "
                       "w.steps + 1 FROM walk AS w JOIN cte_routes AS r ON r.origin = w.node) "
                       "SELECT count(*) FROM (SELECT * FROM walk LIMIT 20)",
    "doc_max_level": "WITH RECURSIVE r(n) MAX RECURSION LEVEL 10 AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                     "WHERE n < 10) SELECT sum(n) FROM r",
}

# What recsql does not yet answer although Spark does: kept visible, and strict, so the day one
# starts passing the marker must go (none at present; docs/dialect.md lists the known differences).
NOT_YET: dict[str, str] = {}
ANSWERED_NEWER.update({
    "rand_seeded": "WITH RECURSIVE randoms(val) AS (SELECT CAST(floor(rand(82374) * 5 + 1) AS INT) UNION ALL "
                   "SELECT CAST(floor(rand(237685) * 5 + 1) AS INT) FROM randoms) SELECT val FROM randoms LIMIT 5",
    "uniform_seeded": "WITH RECURSIVE randoms(val) AS (SELECT CAST(UNIFORM(1, 6, 82374) AS INT) UNION ALL "
                      "SELECT CAST(UNIFORM(1, 6, 237685) AS INT) FROM randoms) SELECT val FROM randoms LIMIT 5",
    "randn_seeded": "WITH RECURSIVE randoms(val) AS (SELECT CAST(floor(randn(82374) * 5 + 1) AS INT) UNION ALL "
                    "SELECT CAST(floor(randn(237685) * 5 + 1) AS INT) FROM randoms) SELECT val FROM randoms LIMIT 5",
    "randstr_seeded": "WITH RECURSIVE randoms(val) AS (SELECT randstr(10, 82374) UNION ALL "
                      "SELECT randstr(10, 237685) FROM randoms) SELECT val FROM randoms LIMIT 5",
    "uuid_seeded": "WITH RECURSIVE randoms(val) AS (SELECT UUID(82374) UNION ALL SELECT UUID(237685) "
                   "FROM randoms) SELECT val FROM randoms LIMIT 5",
    "shuffle_seeded": "WITH RECURSIVE randoms(val) AS (SELECT ARRAY(1, 2, 3, 4, 5) UNION ALL "
                      "SELECT SHUFFLE(ARRAY(1, 2, 3, 4, 5), 237685) FROM randoms) SELECT val FROM randoms LIMIT 5",
    "one_row_subquery": "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT (SELECT n + 1 FROM t1 WHERE n < 5)) "
                        "SELECT * FROM t1 LIMIT 5",
    # beyond Spark's file: seeds across the INT boundary, negative, and with no LIMIT; a scalar
    # subquery that finds no row (NULL, and the recursion goes on until the LIMIT)
    "seeded_edges": "WITH RECURSIVE r(l, v, s) AS (SELECT 0, 0.0D, '' UNION ALL SELECT l + 1, "
                    "rand(2147483646) + randn(-3), uuid(-2) FROM r WHERE l < 4) SELECT * FROM r",
    "one_row_subquery_nulls": "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT coalesce((SELECT n + 1 "
                              "FROM t1 WHERE n < 5), 0)) SELECT * FROM t1 LIMIT 8",
})

# PostgreSQL's with.sql (which PostgreSQL refuses): EXCEPT inside a UNION ALL recursive term;
# each step reads the previous step's rows, so Spark evaluates it
ANSWERED_NEWER.update({
    "except_in_union_all_term": "WITH RECURSIVE foo(i) AS (VALUES (1) UNION ALL (SELECT i + 1 FROM foo "
                                "WHERE i < 10 EXCEPT SELECT i + 1 FROM foo WHERE i < 5)) SELECT * FROM foo",
    "except_all_in_union_all_term": "WITH RECURSIVE foo(i) AS (SELECT 1 UNION ALL (SELECT i + 1 FROM foo "
                                    "WHERE i < 10 EXCEPT ALL SELECT i + 1 FROM foo WHERE i = 3)) "
                                    "SELECT * FROM foo",
    # a LIMIT on a UNION ALL recursion whose term holds a recursion reading the outer one: the
    # two are one mutually recursive group, and the LIMIT counts the outer CTE's rows
    "limit_over_nested_recursion": "WITH RECURSIVE department(id, parent_department, name) AS (VALUES "
                                   "(0, CAST(NULL AS INT), 'ROOT'), (1, 0, 'A'), (2, 1, 'B'), (3, 2, 'C'), "
                                   "(4, 2, 'D'), (5, 0, 'E'), (6, 4, 'F'), (7, 5, 'G')), "
                                   "q AS (SELECT * FROM department UNION ALL (WITH RECURSIVE x AS ("
                                   "SELECT * FROM department UNION ALL (SELECT * FROM q UNION ALL "
                                   "SELECT * FROM x)) SELECT * FROM x)) SELECT * FROM q LIMIT 32",
})

REFUSED_BY_SPARK = {
    "intersect": "WITH RECURSIVE r(level) AS (VALUES (0) INTERSECT SELECT level + 1 FROM r WHERE level < 10) "
                 "SELECT * FROM r",
    "subquery_ref": "WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r "
                    "WHERE (SELECT SUM(level) FROM r) < 10) SELECT * FROM r",
    "right_of_left_join": "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL SELECT level + 1, r.data "
                          "FROM (SELECT 'B' AS data) AS o LEFT JOIN r ON r.data = o.data) SELECT * FROM r",
    # an aggregate in a UNION ALL term aggregates each step's rows (DuckDB's meaning, checked in
    # tests/api/test_tool_spelling.py); these four never end, so recsql stops at the level limit
    "aggregate_term": "WITH RECURSIVE r(id, data) AS (VALUES (0, 1L) UNION ALL SELECT 1, SUM(data) FROM r "
                      "WHERE data < 10 GROUP BY id) SELECT * FROM r",
    "no_anchor": "WITH RECURSIVE r(level) AS (SELECT level + 1 FROM r WHERE level < 3) SELECT * FROM r",
    "max_recursion_level_reached": "WITH RECURSIVE r(level) MAX RECURSION LEVEL 5 AS (VALUES (0) UNION ALL "
                                   "SELECT level + 1 FROM r WHERE level < 150) SELECT count(*) FROM r",
    "order_limit_unbounded": "WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r) "
                             "SELECT level, level FROM r ORDER BY level LIMIT 10",
    "unbounded": "WITH RECURSIVE r(level) AS (VALUES 0 UNION ALL SELECT level + 1 FROM r) SELECT * FROM r",
    "scalar_subquery_no_as": "WITH RECURSIVE t(col) (SELECT 1 UNION ALL SELECT (SELECT max(col) FROM t)) "
                             "SELECT * FROM t LIMIT 5",
    "aggregate_derived_table": "WITH t1 AS (SELECT 1 AS n), t2(n) AS (WITH RECURSIVE t3(n) AS (SELECT 1 UNION ALL "
                               "SELECT n + 1 FROM (SELECT MAX(n) FROM t3)) SELECT * FROM t3) SELECT * FROM t2",
    "aggregate_no_group": "WITH RECURSIVE r(level, data) AS (VALUES (0, 1L) UNION ALL SELECT MAX(level) + 1, "
                          "SUM(data) FROM r WHERE level < 9) SELECT * FROM r",
    "aggregate_projection": "WITH RECURSIVE r(level) AS (VALUES (1L) UNION ALL SELECT SUM(level) FROM r "
                            "WHERE level < 10) SELECT * FROM r",
    "group_by_term": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r GROUP BY n) SELECT * FROM r",
    "window_term": "WITH RECURSIVE win(id, val) AS (SELECT 1, CAST(10 AS BIGINT) UNION ALL SELECT id + 1, "
                   "SUM(val) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM win WHERE id < 3) "
                   "SELECT * FROM win",
    "left_of_right_join_no_filter": "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL SELECT level + 1, "
                                    "r.data FROM r RIGHT JOIN (SELECT 'B' AS data) AS o ON o.data = r.data) "
                                    "SELECT * FROM r",
    "right_of_semi_join": "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, data "
                          "FROM (SELECT 0 AS level, 0 AS data) AS t LEFT SEMI JOIN r ON r.data = t.data "
                          "AND r.level < 9) SELECT * FROM r",
    "right_of_anti_join": "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, data "
                          "FROM (SELECT 0 AS level, 0 AS data) AS t LEFT ANTI JOIN r ON r.data = t.data "
                          "AND r.level < 9) SELECT * FROM r",
}

# recsql's documented extensions (docs/dialect.md): Spark refuses these, recsql answers; the
# expected rows come from a plain-Python evaluation of the same recursion.
EXTENSIONS = {
    "anchor_last": (
        "WITH RECURSIVE r(level) AS (SELECT level + 1 FROM r WHERE level < 10 UNION ALL VALUES (0)) "
        "SELECT * FROM r",
        [(n,) for n in range(11)]),
    "union_dedup": (
        "WITH RECURSIVE r(level) AS (VALUES (0), (0) UNION SELECT (level + 1) % 10 FROM r) SELECT * FROM r",
        [(n,) for n in range(10)]),
    "no_recursive_keyword": (
        "WITH r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r",
        [(n,) for n in range(11)]),
    "two_recursive_terms": (
        "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL SELECT level + 1, data || 'B' FROM r "
        "WHERE level < 2 UNION ALL SELECT level + 1, data || 'C' FROM r WHERE level < 3) SELECT * FROM r",
        None),  # computed below
    "two_anchors_two_terms": (
        "WITH RECURSIVE r(level, data) AS (VALUES (0, 'A') UNION ALL VALUES (0, 'B') UNION ALL "
        "SELECT level + 1, data || 'C' FROM r WHERE level < 2 UNION ALL "
        "SELECT level + 1, data || 'D' FROM r WHERE level < 3) SELECT * FROM r",
        None),
    "union_alias_anchor": (
        "WITH RECURSIVE r AS (SELECT 0 AS level UNION SELECT (level + 1) % 10 FROM r) SELECT * FROM r",
        [(n,) for n in range(10)]),
    "max_level_without_recursive": (  # 10 levels under a limit of 15: each one a Spark iteration
        "WITH r(level) MAX RECURSION LEVEL 15 AS (VALUES 0 UNION ALL SELECT level + 1 FROM r WHERE level < 10) "
        "SELECT * FROM r",
        [(n,) for n in range(11)]),
    "beyond_sparks_default_level": (  # Spark stops at its default 100 levels; recsql's bound is maxIterations
        "WITH RECURSIVE r(level) AS (VALUES 0 UNION ALL SELECT level + 1 FROM r WHERE level < 150) SELECT * FROM r",
        [(n,) for n in range(151)]),
    "with_around_terms": (
        "WITH RECURSIVE t1(n) AS (WITH t2(n) AS (SELECT * FROM t1) SELECT 1 UNION ALL "
        "SELECT n + 1 FROM t2 WHERE n < 5) SELECT * FROM t1",
        [(n,) for n in range(1, 6)]),
    "with_around_terms_alias": (
        "WITH RECURSIVE t1 AS (WITH t2(n) AS (SELECT * FROM t1) SELECT 1 AS n UNION ALL "
        "SELECT n + 1 FROM t2 WHERE n < 5) SELECT * FROM t1",
        [(n,) for n in range(1, 6)]),
    "right_of_left_join_filtered": (
        "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, r.data FROM "
        "(SELECT 0 AS data) AS t LEFT OUTER JOIN r ON r.data = t.data WHERE r.level < 9) SELECT * FROM r",
        [(n, 0) for n in range(10)]),
    "left_of_right_join_filtered": (
        "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, r.data FROM r "
        "RIGHT OUTER JOIN (SELECT 0 AS data) AS t ON t.data = r.data WHERE r.level < 9) SELECT * FROM r",
        [(n, 0) for n in range(10)]),
    "full_join_filtered": (
        "WITH RECURSIVE r(level, data) AS (VALUES (0, 0) UNION ALL SELECT level + 1, r.data FROM r "
        "FULL OUTER JOIN (SELECT 0 AS data) AS t ON t.data = r.data WHERE r.level < 9) SELECT * FROM r",
        [(n, 0) for n in range(10)]),
    "order_by_in_term": (
        "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL (SELECT n + 1 FROM t1 WHERE n < 5 ORDER BY n)) "
        "SELECT * FROM t1",
        [(n,) for n in range(1, 6)]),
    "term_wider_type": (
        "WITH RECURSIVE t1(n, m) AS (SELECT 1, 1 UNION ALL SELECT n + 1, CAST(n + 1 AS BIGINT) FROM t1 "
        "WHERE n < 5) SELECT * FROM t1",
        [(n, n) for n in range(1, 6)]),
}


def _bag_fixpoint(anchors, terms) -> list[tuple]:
    """UNION ALL recursion in plain Python: each step applies every term to the previous step."""
    rows, step = list(anchors), list(anchors)
    while step:
        step = [row for term in terms for row in term(step)]
        rows += step
    return rows


def _two_terms() -> list[tuple]:
    return _bag_fixpoint([(0, "A")], [lambda s: [(lv + 1, d + "B") for lv, d in s if lv < 2],
                                      lambda s: [(lv + 1, d + "C") for lv, d in s if lv < 3]])


def _two_anchors_two_terms() -> list[tuple]:
    return _bag_fixpoint([(0, "A"), (0, "B")], [lambda s: [(lv + 1, d + "C") for lv, d in s if lv < 2],
                                                lambda s: [(lv + 1, d + "D") for lv, d in s if lv < 3]])


COMPUTED = {"two_recursive_terms": _two_terms, "two_anchors_two_terms": _two_anchors_two_terms}


@pytest.fixture(scope="module", autouse=True)
def views(spark):
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW cte_t AS SELECT * FROM VALUES 0, 1, 2 AS t(id)")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW cte_routes(origin, destination) AS VALUES "
              "('New York', 'Washington'), ('New York', 'Boston'), ('Boston', 'New York'), "
              "('Washington', 'Boston'), ('Washington', 'Raleigh')")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW cte_zero_one(current, next) AS VALUES (0, 0), (0, 1), (1, 0), (1, 1)")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW cte_bits(next) AS VALUES (0), (1)")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW cte_employees(id, name, manager_id) AS VALUES "
              "(1, 'Ada', NULL), (2, 'Bob', 1), (3, 'Cy', 1), (4, 'Di', 2), (5, 'Ed', 4), (6, 'Flo', 3)")
    yield
    for view in ("cte_t", "cte_routes", "cte_zero_one", "cte_bits", "cte_employees"):
        spark.catalog.dropTempView(view)


def bag(df) -> Counter:
    return Counter(tuple(_hashable(v) for v in row) for row in df.collect())


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


# Queries whose default run never leaves the Spark loop (a branch the driver cannot translate; two
# have no recursive step to run): a Spark-loop variant would run the very same iterations again.
# Their default run checks they still run on Spark alone, so a change that brings the driver in
# fails here, and their Spark-loop variant comes back.
ON_SPARK_ALONE = frozenset({
    "cycles_arrays", "distinct_term", "doc_graph_reach", "except_all_in_union_all_term",
    "except_in_union_all_term", "limit_over_nested_recursion", "nested_in_with",
    "no_self_reference", "one_row_subquery", "one_row_subquery_nulls", "rand_seeded", "randn_seeded",
    "randstr_seeded", "seeded_edges", "shadows_outer_cte", "shuffle_seeded", "two_ctes_in_term",
    "uniform_seeded", "uuid_seeded", "with_in_term", "with_in_term_star",
})


# Queries the driver's allowlist took off the Spark loop (outer, semi and anti joins of the
# recursive reference; `||`, LENGTH, SUBSTR, CHR, ASCII; a loop-invariant scalar subquery, run as
# its value): their default run goes to the driver.
ON_DRIVER_BY_DEFAULT = frozenset({
    "anti_join_left_side", "left_join_base", "left_join_left_side", "limit_stops_row_growth",
    "limited_reads_in_recursion", "right_join_right_side", "semi_join_left_side", "string",
    "string_functions", "two_anchors",
})


def _answered_cases():
    paths = (("default", {}), ("spark_loop", SPARK_LOOP))
    for cases in (ANSWERED, ANSWERED_NEWER):
        for name, query in cases.items():
            for path, conf in paths[:1] if name in ON_SPARK_ALONE else paths:
                marks = [pytest.mark.xfail(strict=True, reason=NOT_YET[name])] if name in NOT_YET else []
                yield pytest.param(name, query, conf, id=f"{name}-{path}", marks=marks)


# Spark's own answer to each query (rows, schema), computed once for both of its paths: Spark's
# recursion is the slower side of most of these cases (left_join_base: 3.6 s against recsql's 0.7 s)
_SPARKS_ANSWERS: dict[str, tuple[Counter, list]] = {}


def sparks_answer(spark, query: str) -> tuple[Counter, list]:
    if query not in _SPARKS_ANSWERS:
        expected = spark.sql(query)
        _SPARKS_ANSWERS[query] = bag(expected), [(f.name, f.dataType) for f in expected.schema.fields]
    return _SPARKS_ANSWERS[query]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name, query, conf", list(_answered_cases()))
def test_same_answer_as_spark(spark, name, query, conf):
    expected_rows, expected_schema = sparks_answer(spark, query)
    result = recsql.run(query, spark=spark, conf={"spark.recsql.maxIterations": 60, **conf})
    actual = result.df
    assert bag(actual) == expected_rows
    if name in ON_SPARK_ALONE:
        assert {s.ran_on for s in result.stats} <= {"spark"}, \
            f"{name} now runs on the driver too: give it its spark_loop variant back"
    if name in ON_DRIVER_BY_DEFAULT and not conf:
        assert "driver" in {s.ran_on for s in result.stats}, f"{name} no longer reaches the driver"
    assert [(f.name, f.dataType) for f in actual.schema.fields] == expected_schema


# Why recsql refuses each of them: its own analysis, or Spark's level limit for the ones that
# never end (a low one on both sides, 5 levels, not Spark's default 100: the same refusals at 20)
REFUSED_AS = {
    "intersect": "RECSQL_NO_BASE_BRANCH", "no_anchor": "RECSQL_NO_BASE_BRANCH",
    "subquery_ref": "RECSQL_RECURSIVE_REFERENCE_IN_SUBQUERY",
    "scalar_subquery_no_as": "RECSQL_RECURSIVE_REFERENCE_IN_SUBQUERY",
    "aggregate_derived_table": "INVALID_RECURSIVE_REFERENCE.PLACE",
    "aggregate_no_group": "RECSQL_RECURSION_NEVER_ENDS", "aggregate_projection": "RECSQL_RECURSION_NEVER_ENDS",
    "window_term": "RECSQL_FORBIDDEN_IN_RECURSION", "right_of_anti_join": "RECSQL_NONMONOTONE_NEGATION",
    **dict.fromkeys(["right_of_left_join", "aggregate_term", "max_recursion_level_reached",
                     "order_limit_unbounded", "unbounded", "group_by_term", "left_of_right_join_no_filter",
                     "right_of_semi_join"], "RECURSION_LEVEL_LIMIT_EXCEEDED"),
}


@pytest.mark.parametrize("name", list(REFUSED_BY_SPARK))
def test_refused_by_spark_is_refused_clearly(spark, name):
    query = REFUSED_BY_SPARK[name]
    spark.conf.set("spark.sql.cteRecursionLevelLimit", "5")
    try:
        with pytest.raises(Exception):  # noqa: B017 - Spark refuses in its own ways (some via Py4J)
            spark.sql(query).collect()
        with pytest.raises(RecSQLError) as error:
            recsql.sql(query, spark=spark, conf={"spark.recsql.maxIterations": 60}).collect()
        assert error.value.condition == REFUSED_AS[name]
    finally:
        spark.conf.unset("spark.sql.cteRecursionLevelLimit")


@pytest.mark.parametrize("query", [
    "WITH RECURSIVE r(n) AS (SELECT x FROM VALUES 1, 2 AS t(x) UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
    "SELECT * FROM r",
    "WITH RECURSIVE r(n) AS (SELECT x FROM VALUES 'a', 'b' t(x) UNION ALL SELECT n || hex(X 'F0') FROM r "
    "WHERE length(n) < 4) SELECT * FROM r",
])
def test_sparks_spellings_of_values_rows_and_binary_literals(spark, query):
    assert bag(recsql.sql(query, spark=spark)) == bag(spark.sql(query))


@pytest.mark.parametrize("name", list(EXTENSIONS))
def test_extensions_match_a_python_fixpoint(spark, name):
    query, expected = EXTENSIONS[name]
    expected = expected if expected is not None else COMPUTED[name]()
    with pytest.raises(Exception):  # noqa: B017 - Spark refuses in its own ways (some via Py4J)
        spark.sql(query).collect()
    assert bag(recsql.sql(query, spark=spark)) == Counter(expected)


COUNTER = ("WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r WHERE level < {n}) "
           "SELECT * FROM r")


@pytest.mark.parametrize("key, limit, n, condition", [  # each just within and just past its limit
    ("spark.sql.cteRecursionLevelLimit", 4, 3, None),
    ("spark.sql.cteRecursionLevelLimit", 4, 4, "RECURSION_LEVEL_LIMIT_EXCEEDED"),
    ("spark.sql.cteRecursionRowLimit", 4, 2, None),
    ("spark.sql.cteRecursionRowLimit", 4, 3, "RECURSION_ROW_LIMIT_EXCEEDED"),
])
@pytest.mark.parametrize("conf", [{}, SPARK_LOOP], ids=["default", "spark_loop"])
def test_sparks_recursion_limits_when_set(spark, key, limit, n, condition, conf):
    query = COUNTER.format(n=n)
    spark.conf.set(key, str(limit))
    try:
        if condition is None:
            assert bag(recsql.sql(query, spark=spark, conf=conf)) == bag(spark.sql(query))
        else:
            with pytest.raises(Exception, match=condition):  # noqa: B017 - Spark's own error
                spark.sql(query).collect()
            with pytest.raises(RecSQLError) as error:
                recsql.sql(query, spark=spark, conf=conf).collect()
            assert error.value.condition == condition and key in str(error.value)
    finally:
        spark.conf.unset(key)


ZERO_ONE = ("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT next FROM t LEFT JOIN cte_zero_one ON n = current) "
            "SELECT {items} FROM t{limit}")


def test_row_growth_stops_at_sparks_row_limit_unless_a_limit_ends_it(spark):
    # Spark's own test file runs with spark.sql.cteRecursionRowLimit=50; without it recsql, which
    # does not impose Spark's default of a million rows, would double the rows until maxIterations
    spark.conf.set("spark.sql.cteRecursionRowLimit", "50")
    try:
        endless = ZERO_ONE.format(items="*", limit="")
        with pytest.raises(Exception, match="RECURSION_ROW_LIMIT_EXCEEDED"):  # noqa: B017 - Spark's own error
            spark.sql(endless).collect()
        with pytest.raises(RecSQLError) as error:
            recsql.sql(endless, spark=spark).collect()
        assert error.value.condition == "RECURSION_ROW_LIMIT_EXCEEDED"
        limited = "SELECT count(*) FROM (" + ZERO_ONE.format(items="*", limit=" LIMIT 60") + ")"
        assert bag(recsql.sql(limited, spark=spark)) == bag(spark.sql(limited)) == Counter({(60,): 1})
    finally:
        spark.conf.unset("spark.sql.cteRecursionRowLimit")


COUNT_TO_9 = "WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL SELECT level + 1 FROM r WHERE level < 9) "


@pytest.mark.parametrize("statement", [
    COUNT_TO_9 + "INSERT INTO {table} SELECT * FROM r",
    COUNT_TO_9 + "FROM r INSERT INTO {table} SELECT * INSERT INTO {table} SELECT *",
], ids=["insert", "multi_insert"])
def test_recursion_in_commands_writes_what_spark_writes(spark, statement):
    written = {}
    for who, run in (("spark", spark.sql), ("recsql", lambda s: recsql.sql(s, spark=spark))):
        table = f"cte_written_{who}"
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(f"CREATE TABLE {table}(level INT) USING parquet")
        try:
            run(statement.format(table=table)).collect()
            written[who] = bag(spark.table(table))
        finally:
            spark.sql(f"DROP TABLE IF EXISTS {table}")
    assert written["recsql"] == written["spark"] and written["spark"]


def test_recursion_in_a_view_reads_what_spark_reads(spark):
    recsql.sql("CREATE OR REPLACE TEMPORARY VIEW cte_rv AS " + COUNT_TO_9 + "SELECT * FROM r", spark=spark)
    try:
        # read through recsql, it answers what Spark answers
        assert bag(recsql.sql("SELECT * FROM cte_rv", spark=spark)) == bag(spark.sql(COUNT_TO_9 + "SELECT * FROM r"))
    finally:
        spark.catalog.dropTempView("cte_rv")


@pytest.mark.parametrize("temporary", ["TEMPORARY ", ""])
def test_a_view_spark_evaluates_by_itself_stays_a_view_spark_reads(spark, temporary):
    """Spark's cte-recursion.sql creates `rv` over a body Spark evaluates by itself: created
    through recsql, plain Spark reads it as it reads the one Spark creates (pipelines mix
    `recsql.sql` and `spark.sql`), and so does recsql."""
    body = COUNT_TO_9 + "SELECT * FROM r"
    spark.sql(f"CREATE OR REPLACE {temporary}VIEW cte_rv_by_spark AS {body}")
    recsql.sql(f"CREATE OR REPLACE {temporary}VIEW cte_rv_by_recsql AS {body}", spark=spark)
    drop = spark.catalog.dropTempView if temporary else lambda name: spark.sql(f"DROP VIEW {name}")
    try:
        expected = bag(spark.sql("SELECT * FROM cte_rv_by_spark"))
        assert expected == bag(spark.sql("SELECT * FROM cte_rv_by_recsql"))
        assert expected == bag(recsql.sql("SELECT * FROM cte_rv_by_recsql", spark=spark))
        assert expected == bag(spark.sql("SELECT * FROM range(10)"))
    finally:
        drop("cte_rv_by_spark")
        drop("cte_rv_by_recsql")
