"""A table reference's identity: its name parts (catalog, schema, table) as sqlglot parsed them.

Spark resolves `analytics.edges`, `spark_catalog.analytics.edges` and `` `analytics`.`edges` ``
by their parts, and `` `analytics.edges` `` is one part (a table named `analytics.edges` in the
current schema, which spark_catalog refuses to create). So a name is never flattened to a
dotted string: it keeps its parts everywhere it flows, is handed to Spark quoted part by part,
and compares as Spark compares identifiers (case-insensitively). A leaf: it imports no planner
module."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, eq=False)
class TableName:
    parts: tuple[str, ...]  # (catalog, schema, table), as many as were written

    @classmethod
    def of(cls, table: exp.Table) -> TableName:
        return cls(tuple(part.name for part in table.parts))

    @classmethod
    def parse(cls, text: str) -> TableName:
        """`text` read as Spark reads a table name (`db.t`, `` `db.t` ``)."""
        return cls.of(exp.to_table(text, dialect="rasql"))

    @property
    def sql(self) -> str:
        """Every part back-quoted, as Spark names a relation in its messages; what
        `spark.table` and `DataFrameWriter.saveAsTable` resolve exactly as the SQL did."""
        return ".".join(quote(p) for p in self.parts)

    @property
    def key(self) -> tuple[str, ...]:
        """The parts as Spark compares them (identifiers are case-insensitive)."""
        return tuple(p.lower() for p in self.parts)

    @property
    def qualified(self) -> bool:
        return len(self.parts) > 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TableName) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        """As a person reads it: parts quoted only where they must be (`analytics.edges`)."""
        return ".".join(p if _PLAIN.fullmatch(p) else quote(p) for p in self.parts)


def quote(part: str) -> str:
    """`part` as one quoted SQL identifier."""
    return "`" + part.replace("`", "``") + "`"


def is_cte_reference(table: exp.Table, names) -> bool:
    """`table` names one of the CTEs `names` (lower-case): unqualified, as SQL scoping requires
    (`analytics.path` is a catalog table even inside `WITH path AS ...`)."""
    return isinstance(table.this, exp.Identifier) and not table.args.get("db") \
        and table.name.lower() in names
