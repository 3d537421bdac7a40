"""What one call of `recsql.run` asks (`Request`) and what it answers (`Result`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from pyspark.sql import DataFrame, SparkSession

from recsql.executor.loop.stats import IterationStats
from recsql.executor.run import Executor
from recsql.parser import Statement
from recsql.planner import QueryPlan
from recsql.settings import Settings
from recsql.statements.catalog import SparkCatalog


@dataclass
class Result:
    """What `recsql.run` returns: the DataFrame and, per recursive CTE and iteration, stats."""

    df: DataFrame
    stats: list[IterationStats] = field(default_factory=list)
    plan: QueryPlan | None = None
    kind: str = "query"  # "query", "command" or "explain"


@dataclass
class Request:
    """One statement to run on `spark`. `frames` binds keyword-argument DataFrames;
    `passthrough` runs the statement as the user wrote it on Spark (what a statement that needs
    no recsql feature does)."""

    spark: SparkSession
    settings: Settings
    statement: Statement
    args: dict | None
    frames: dict[str, DataFrame]
    passthrough: Callable[[], DataFrame]
    on_iteration: Callable[[IterationStats], None] | None = None
    resume: bool = False  # continue recursive groups from their latest matching checkpoint

    @property
    def text(self) -> str:
        return self.statement.text

    @cached_property
    def catalog(self) -> SparkCatalog:
        """The catalog as this statement binds against it (a request runs one statement)."""
        return SparkCatalog(self.spark)

    @cached_property
    def executor(self) -> Executor:
        return Executor(spark=self.spark, settings=self.settings, args=self.args,
                        frames=self.frames, tables=self.catalog.frames,
                        on_iteration=self.on_iteration, resume=self.resume)

    def command(self, stats: list[IterationStats] | None = None,
                plan: QueryPlan | None = None) -> Result:
        """The result of a statement that answers no rows (Spark's empty `result` column)."""
        empty = self.spark.createDataFrame([], "result string").limit(0)
        return Result(df=empty, stats=stats or [], plan=plan, kind="command")
