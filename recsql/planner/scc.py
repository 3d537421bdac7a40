"""Strongly connected components in dependency order (Tarjan): each component comes after every
component it depends on, which is the stratum order the executor follows."""

from __future__ import annotations


def strongly_connected(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Components of the graph `node -> edges[node]` (node depends on its edges), dependencies
    first; within a component, nodes keep their order in `nodes`."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ()), key=nodes.index):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            result.append(sorted(component, key=nodes.index))

    for node in nodes:
        if node not in index:
            visit(node)
    return result
