"""Stage 2: analyse and plan. Pure Python over sqlglot ASTs; no Spark needed."""

from recsql.planner.build import plan_query
from recsql.planner.catalog import Catalog, DictCatalog
from recsql.planner.model import (
    ALL,
    DELTA,
    Branch,
    CTEPlan,
    GroupStep,
    HeadColumn,
    QueryPlan,
    ViewStep,
    cte_binding,
)
from recsql.planner.text import render_plan

__all__ = [
    "ALL", "DELTA", "Branch", "CTEPlan", "Catalog", "DictCatalog", "GroupStep", "HeadColumn",
    "QueryPlan", "ViewStep", "cte_binding", "plan_query", "render_plan",
]
