"""A SQLAlchemy dialect for `recsql serve` (and Spark's own Thrift server): `recsql://host:port/db`.

PyHive's Hive dialect reads the first column of `SHOW TABLES`, which Hive fills with the table
name and Spark with the database, so on Spark every table list (SQLAlchemy's inspector,
Superset's dataset editor) shows the database's name instead of its tables. This dialect is
PyHive's, reading Spark's columns (`namespace, tableName, isTemporary` of `SHOW TABLES` and `SHOW
VIEWS`) by name, and telling a missing table by Spark's `TABLE_OR_VIEW_NOT_FOUND`.

    engine = sqlalchemy.create_engine("recsql://analyst@127.0.0.1:10000/analytics")

Registered as the `sqlalchemy.dialects` entry points `recsql` and `hive.recsql`; Superset picks
its engine spec (its SQL parser, its Hive support) by the URL's backend, so a Superset database
is `hive+recsql://...` (docs/server.md). This module imports only PyHive and SQLAlchemy (1.4 or
2.x): it is installed into a BI tool's environment without recsql's dependencies
(`pip install --no-deps recsql`).
"""

from __future__ import annotations

from pyhive.sqlalchemy_hive import HiveDialect
from sqlalchemy import exc, text

NOT_FOUND = "TABLE_OR_VIEW_NOT_FOUND"


class RecSQLDialect(HiveDialect):
    name = "recsql"
    driver = "pyhive"
    supports_statement_cache = False  # PyHive's compiler caches nothing either

    def _show(self, connection, what: str, schema: str | None) -> list:
        query = f"SHOW {what}"
        if schema:
            query += " IN " + self.identifier_preparer.quote_identifier(schema)
        return connection.execute(text(query)).mappings().all()

    def _names(self, connection, what: str, schema: str | None, temporary: bool) -> list[str]:
        name = "tableName" if what == "TABLES" else "viewName"
        return [row[name] for row in self._show(connection, what, schema)
                if bool(row["isTemporary"]) == temporary]

    def get_table_names(self, connection, schema=None, **kw) -> list[str]:
        """The schema's tables, without its views (SQLAlchemy lists those apart)."""
        views = set(self._names(connection, "VIEWS", schema, temporary=False))
        return [t for t in self._names(connection, "TABLES", schema, temporary=False) if t not in views]

    def get_view_names(self, connection, schema=None, **kw) -> list[str]:
        return self._names(connection, "VIEWS", schema, temporary=False)

    def get_temp_view_names(self, connection, schema=None, **kw) -> list[str]:
        """The connection's temporary views (Spark lists them under every database)."""
        return self._names(connection, "VIEWS", schema, temporary=True)

    def _get_table_columns(self, connection, table_name, schema):
        full_name = ".".join(self.identifier_preparer.quote_identifier(part)
                             for part in (schema, table_name) if part)
        try:
            return connection.execute(text(f"DESCRIBE {full_name}")).fetchall()
        except exc.OperationalError as error:
            if NOT_FOUND in str(error):
                raise exc.NoSuchTableError(full_name) from error
            raise


dialect = RecSQLDialect
