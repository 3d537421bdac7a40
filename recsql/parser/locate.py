"""Where a node sits in the statement text: keyword arguments for `RecSQLError`.

In the parser's room, the lowest that holds the statement's text and tree: the planner, the
executor and the statement layer all point their errors at the user's SQL with it."""

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


def locate_span(node: exp.Expr, sql: str) -> dict:
    """`line`, `pos` and `length` of the whole of `node` in `sql` (from its first token to its
    last), as `locate` gives them of its first identifier; `locate`'s where the tokens carry
    no offsets."""
    spans = [(n.meta["start"], n.meta["end"]) for n in node.walk()
             if isinstance(n, exp.Expr) and n.meta.get("start") is not None and n.meta.get("end") is not None]
    if not spans:
        return locate(node, sql)
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    line_end = sql.find("\n", start)
    if line_end != -1:  # the caret line shows the first line only
        end = min(end, line_end - 1)
    return {"line": sql.count("\n", 0, start) + 1, "pos": start - (sql.rfind("\n", 0, start) + 1),
            "length": end - start + 1}


def locate_name(table: exp.Table, sql: str) -> dict:
    """Where a table's whole name is written: from its first part to its last."""
    first, last = locate(table.parts[0], sql), locate(table.parts[-1], sql)
    if first and last and first["line"] == last["line"]:
        first["length"] = last["pos"] + last["length"] - first["pos"]
    return first or locate(table, sql)
