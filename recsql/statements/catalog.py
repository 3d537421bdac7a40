"""The planner's view of the session catalog (temp views, tables, stored recursive views)."""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from recsql.executor.state import bases
from recsql.planner.catalog import StoredView
from recsql.planner.model import DeclaredAggregate
from recsql.planner.names import TableName
from recsql.statements import stored_aggregates, views


class SparkCatalog:
    """The `recsql.planner.catalog.Catalog` of a Spark session, for one statement."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        # What one statement asked, answered once: the view expansion and the planner ask about
        # the same tables (a base table's columns up to three times, each a Spark analysis), and
        # nothing the statement does changes the catalog before it has been planned.
        self._columns: dict[TableName, list[str] | None] = {}
        self._views: dict[TableName, StoredView | None] = {}
        self._aggregates: dict[str, DeclaredAggregate | None] = {}
        # `spark.table` of each table asked about, analysed once; the statement's execution reads
        # the same frames (`Context.tables`: the endgame's identity checks and copies)
        self.frames: dict[TableName, DataFrame] = {}

    def columns(self, table: TableName) -> list[str] | None:
        if table not in self._columns:
            try:  # quoted part by part, `spark.table` resolves the name exactly as the SQL does
                self._columns[table] = self.frame(table).columns
            except AnalysisException:
                self._columns[table] = None
        found = self._columns[table]
        return None if found is None else list(found)

    def tables(self, namespace: tuple[str, ...] = ()) -> list[str]:
        try:
            if not namespace:
                return [t.name for t in self.spark.catalog.listTables()]
            # a schema's listing also holds the session's temp views, which no qualified name reads
            listed = self.spark.catalog.listTables(TableName(namespace).sql)
            return [t.name for t in listed if not t.isTemporary]
        except AnalysisException:  # no such schema
            return []

    def recursive_view(self, table: TableName) -> StoredView | None:
        if table not in self._views:
            self._views[table] = views.stored_view(self.spark, table.sql, lambda: self.frame(table))
        return self._views[table]

    def aggregate(self, name: str) -> DeclaredAggregate | None:
        key = name.lower()
        if key not in self._aggregates:
            self._aggregates[key] = stored_aggregates.stored(self.spark, name)
        return self._aggregates[key]

    def frame(self, table: TableName) -> DataFrame:
        """`spark.table(table)`, analysed once: a temporary view's schema tells whether it is a
        recursive view, and is then also the columns the planner asks for."""
        return bases.read_once(self.frames, self.spark, table)
