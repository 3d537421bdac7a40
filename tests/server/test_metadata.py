"""The metadata calls JDBC/ODBC drivers and BI tools make, per-connection sessions, and
SQLAlchemy's `hive://` reflection, through PyHive's Thrift client on 127.0.0.1."""

from __future__ import annotations

import pytest
from pyhive.exc import OperationalError
from pyhive.hive import _unwrap_column
from TCLIService import ttypes

from tests.server.clients import SSSP, connect, cursor, sssp_oracle

OK = ttypes.TStatusCode.SUCCESS_STATUS


@pytest.fixture(scope="module")
def database(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS srvdb")
    spark.sql("CREATE TABLE IF NOT EXISTS srvdb.points USING parquet AS "
              "SELECT CAST(id AS INT) AS x, CAST(id * 2 AS DECIMAL(10,2)) AS y FROM range(3)")
    yield "srvdb"
    spark.sql("DROP DATABASE IF EXISTS srvdb CASCADE")


def fetch(client, response) -> list[tuple]:
    assert response.status.statusCode == OK, response.status
    handle = response.operationHandle
    metadata = client.GetResultSetMetadata(ttypes.TGetResultSetMetadataReq(handle))
    names = [c.columnName for c in metadata.schema.columns]
    rows: list[tuple] = []
    for _ in range(100):
        batch = client.FetchResults(ttypes.TFetchResultsReq(handle, ttypes.TFetchOrientation.FETCH_NEXT, 1000))
        assert batch.status.statusCode == OK, batch.status
        columns = [_unwrap_column(c) for c in batch.results.columns]
        if not columns or not columns[0]:
            break
        rows.extend(zip(*columns))
    client.CloseOperation(ttypes.TCloseOperationReq(handle))
    return [dict(zip(names, row)) for row in rows]


def test_metadata_calls(server, database):
    connection = connect(server)
    try:
        client, session = connection.client, connection.sessionHandle
        info = client.GetInfo(ttypes.TGetInfoReq(session, ttypes.TGetInfoType.CLI_DBMS_NAME))
        assert info.infoValue.stringValue == "Spark SQL"
        assert fetch(client, client.GetCatalogs(ttypes.TGetCatalogsReq(session))) == []
        schemas = fetch(client, client.GetSchemas(ttypes.TGetSchemasReq(session, None, "%")))
        assert {"default", "srvdb"} <= {s["TABLE_SCHEM"] for s in schemas}
        tables = fetch(client, client.GetTables(ttypes.TGetTablesReq(session, None, "srvdb", "%")))
        found = {(t["TABLE_SCHEM"], t["TABLE_NAME"], t["TABLE_TYPE"]) for t in tables}
        assert found == {("srvdb", "points", "TABLE"), (None, "edge", "VIEW")}  # temp views too
        views = fetch(client, client.GetTables(ttypes.TGetTablesReq(session, None, "%", "e%", ["VIEW"])))
        assert [t["TABLE_NAME"] for t in views] == ["edge"]
        types = fetch(client, client.GetTableTypes(ttypes.TGetTableTypesReq(session)))
        assert [t["TABLE_TYPE"] for t in types] == ["TABLE", "VIEW"]
        columns = fetch(client, client.GetColumns(ttypes.TGetColumnsReq(session, None, "srvdb", "points")))
        assert [(c["COLUMN_NAME"], c["DATA_TYPE"], c["TYPE_NAME"], c["ORDINAL_POSITION"]) for c in columns] \
            == [("x", 4, "INT", 1), ("y", 3, "DECIMAL(10,2)", 2)]
        assert columns[1]["COLUMN_SIZE"] == 10 and columns[1]["DECIMAL_DIGITS"] == 2
        edge = fetch(client, client.GetColumns(ttypes.TGetColumnsReq(session, None, None, "edge", "C%")))
        assert [c["COLUMN_NAME"] for c in edge] == ["Cost"]
        type_info = fetch(client, client.GetTypeInfo(ttypes.TGetTypeInfoReq(session)))
        assert {"INT", "BIGINT", "STRING", "DECIMAL", "TIMESTAMP"} <= {t["TYPE_NAME"] for t in type_info}
        functions = fetch(client, client.GetFunctions(ttypes.TGetFunctionsReq(session, None, None, "abs")))
        assert [f["FUNCTION_NAME"] for f in functions] == ["abs"]
        keys = client.GetPrimaryKeys(ttypes.TGetPrimaryKeysReq(session, None, "srvdb", "points"))
        assert fetch(client, keys) == []
        cross = client.GetCrossReference(ttypes.TGetCrossReferenceReq(session, None, "srvdb", "points"))
        assert fetch(client, cross) == []
    finally:
        connection.close()


def test_each_connection_has_its_own_session(server, database):
    with cursor(server) as one, cursor(server) as two:
        one.execute("CREATE TEMPORARY VIEW mine AS SELECT 1 AS a")
        one.execute("USE srvdb")
        one.execute("SET spark.recsql.maxIterations = 123")
        one.execute("SELECT current_database(), (SELECT count(*) FROM points), (SELECT a FROM mine)")
        assert one.fetchall() == [("srvdb", 3, 1)]
        with pytest.raises(OperationalError, match="TABLE_OR_VIEW_NOT_FOUND"):
            two.execute("SELECT * FROM mine")
        two.execute("SELECT current_database()")
        assert two.fetchall() == [("default",)]
        two.execute("SET spark.recsql.maxIterations")
        assert two.fetchall() != [("spark.recsql.maxIterations", "123")]


def test_connection_url_settings(server, database):
    configuration = {"use:database": "srvdb", "set:hiveconf:spark.recsql.maxIterations": "77",
                     "set:hiveconf:hive.server2.thrift.resultset.default.fetch.size": "1000"}
    with cursor(server, configuration=configuration, database="srvdb") as cur:
        cur.execute("SET spark.recsql.maxIterations")
        assert cur.fetchall() == [("spark.recsql.maxIterations", "77")]
        cur.execute("SELECT current_database()")
        assert cur.fetchall() == [("srvdb",)]


def test_sqlalchemy_hive_inspect(server, database):
    from sqlalchemy import create_engine, inspect

    engine = create_engine(f"hive://analyst@127.0.0.1:{server.port}/default")  # SASL PLAIN
    try:
        inspector = inspect(engine)
        assert {"default", "srvdb"} <= set(inspector.get_schema_names())
        assert inspector.has_table("points", schema="srvdb")
        columns = inspector.get_columns("points", schema="srvdb")
        assert [(c["name"], type(c["type"]).__name__) for c in columns] == [("x", "Integer"), ("y", "HiveDecimal")]
        assert [c["name"] for c in inspector.get_columns("edge")] == ["Src", "Dst", "Cost"]
        # PyHive reads the first column of SHOW TABLES, which Spark (and so recsql) fills with
        # the database ('' for the session's temporary views): against Spark's own Thrift
        # server it lists the same
        assert set(inspector.get_table_names(schema="srvdb")) == {"srvdb", ""}
    finally:
        engine.dispose()


def test_create_table_as_a_recursive_query(server, database):
    """What dbt-spark's table materialization sends: CREATE TABLE ... USING parquet AS <query>."""
    with cursor(server) as cur:
        cur.execute(f"CREATE TABLE srvdb.shortest USING parquet AS {SSSP}")
        cur.execute("SELECT Dst, Cost FROM srvdb.shortest")
        assert sorted(cur.fetchall()) == sssp_oracle()
        cur.execute("EXPLAIN SELECT * FROM srvdb.shortest")
        assert "Scan parquet" in cur.fetchall()[0][0]


def test_a_recursive_views_columns_are_its_evaluated_answers(server, database, spark):
    """CREATE VIEW over the server types the recursive query without running it: DESCRIBE and
    GetColumns report what Spark reports for a table of the evaluated answer (a payload column,
    a min() head widened by its branches, a SEARCH column's struct, final-query expressions)."""
    import recsql
    from tests.server.clients import EDGE_SCHEMA, EDGES

    spark.createDataFrame(EDGES, EDGE_SCHEMA).write.mode("overwrite").saveAsTable("srvdb.typed_edges")
    query = """WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Via) AS (SELECT 1, 0, 'start')
                 UNION (SELECT e.Dst, path.Cost + CAST(e.Cost AS BIGINT), CAST(e.Src AS STRING)
                        FROM path, srvdb.typed_edges e WHERE path.Dst = e.Src),
               walk (node) AS (SELECT 1 UNION SELECT e.Dst FROM walk, srvdb.typed_edges e
                               WHERE e.Src = walk.node AND e.Dst > e.Src) SEARCH BREADTH FIRST BY node SET seq
               SELECT Dst, Cost, Via, seq, Cost / 2 AS half, count(*) OVER () AS n
               FROM path JOIN walk ON path.Dst = walk.node"""
    recsql.sql(query, spark=spark).write.saveAsTable("srvdb.typed_answer")

    def described(cur, name):
        cur.execute(f"DESCRIBE {name}")
        return [tuple(r[:2]) for r in cur.fetchall()]

    def columns(client, session, name):
        listed = fetch(client, client.GetColumns(ttypes.TGetColumnsReq(session, None, "srvdb", name)))
        return [(c["COLUMN_NAME"], c["DATA_TYPE"], c["TYPE_NAME"], c["COLUMN_SIZE"], c["DECIMAL_DIGITS"],
                 c["ORDINAL_POSITION"]) for c in listed]

    connection = connect(server)
    try:
        cur = connection.cursor()
        cur.execute(f"CREATE VIEW srvdb.typed_view AS {query}")
        assert described(cur, "srvdb.typed_view") == described(cur, "srvdb.typed_answer")
        assert [t for _, t in described(cur, "srvdb.typed_view")][1:3] == ["bigint", "string"]
        client, session = connection.client, connection.sessionHandle
        assert columns(client, session, "typed_view") == columns(client, session, "typed_answer")
    finally:
        connection.close()
