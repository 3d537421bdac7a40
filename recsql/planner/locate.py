"""Where a node sits in the statement text: keyword arguments for `RecSQLError`."""

from __future__ import annotations

from sqlglot import exp


def locate(node: exp.Expr | None, sql: str | None = None) -> dict:
    """`line`, `pos` (0-based column) and `length` of `node`'s first identifier, when known."""
    meta = _meta(node)
    if not meta or "line" not in meta:
        return {}
    start, end = meta.get("start"), meta.get("end")
    if start is not None and sql is not None:
        pos = start - (sql.rfind("\n", 0, start) + 1)
    else:
        pos = max(0, meta.get("col", 1) - 1)
    length = (end - start + 1) if start is not None and end is not None else 1
    return {"line": meta["line"], "pos": pos, "length": length}


def _meta(node: exp.Expr | None) -> dict | None:
    if node is None:
        return None
    if node.meta.get("line") is not None:
        return node.meta
    for child in node.walk():
        if isinstance(child, exp.Expr) and child.meta.get("line") is not None:
            return child.meta
    return None
