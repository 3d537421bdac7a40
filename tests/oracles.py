"""Independent oracles: plain-Python fixpoints and graph-library calls. Never recsql."""

from __future__ import annotations

import heapq
from collections import defaultdict


def successors(edges):
    succ = defaultdict(set)
    for e in edges:
        succ[e[0]].add(e[1])
    return succ


def transitive_closure(edges) -> set[tuple]:
    """Pairs (x, y) joined by a path of length >= 1 (so (x, x) only on a cycle through x)."""
    succ = successors(edges)
    closure = set()
    for start in {e[0] for e in edges}:
        seen, stack = set(), list(succ[start])
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            stack.extend(succ[node])
        closure |= {(start, node) for node in seen}
    return closure


def reachable(edges, start) -> set:
    """start and every node reachable from it."""
    succ = successors(edges)
    seen, stack = {start}, [start]
    while stack:
        for nxt in succ[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def dijkstra(weighted_edges, source) -> dict:
    adj = defaultdict(list)
    for u, v, c in weighted_edges:
        adj[u].append((v, c))
    dist = {source: 0}
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for v, c in adj[u]:
            if v not in dist or d + c < dist[v]:
                dist[v] = d + c
                heapq.heappush(heap, (d + c, v))
    return dist


def dijkstra_predecessors(labelled_edges, source, source_payload) -> dict:
    """Dijkstra that keeps, per node, the least (cost, predecessor, label...) over the edges
    (u, v, cost, label...) that reach it: among equally cheap routes the smallest predecessor
    wins, then the smallest label (positive costs). `source_payload`: the source's own tuple
    after its cost. Returns node -> (cost, predecessor, label...)."""
    adj = defaultdict(list)
    for u, v, c, *label in labelled_edges:
        adj[u].append((v, c, tuple(label)))
    best = {source: (0, *source_payload)}
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > best[u][0]:
            continue
        for v, c, label in adj[u]:
            candidate = (d + c, u, *label)
            if v not in best or candidate < best[v]:
                if v not in best or d + c < best[v][0]:
                    heapq.heappush(heap, (d + c, v))
                best[v] = candidate
    return best


def routes(predecessor: dict, source) -> dict:
    """node -> the list of nodes from `source` to it, following `predecessor` back."""
    result = {}
    for node in predecessor:
        walk = [node]
        while walk[0] != source:
            walk.insert(0, predecessor[walk[0]])
        result[node] = walk
    return result


def longest_dag_paths(weighted_edges, source) -> dict:
    """node -> (the greatest cost of a path from `source`, the greatest predecessor among
    those achieving it): the tuple maximum over every derivation, in a DAG."""
    adj = defaultdict(list)
    for u, v, c in weighted_edges:
        adj[u].append((v, c))
    best = {source: (0, source)}
    changed = True
    while changed:  # naive fixpoint: plain and independent of any evaluation order
        changed = False
        for u in list(best):
            for v, c in adj[u]:
                candidate = (best[u][0] + c, u)
                if v not in best or candidate > best[v]:
                    best[v], changed = candidate, True
    return best


def apsp_nonempty(weighted_edges) -> set[tuple]:
    """(x, y, cost) of the cheapest path of length >= 1 from x to y (non-negative costs)."""
    nodes = {e[0] for e in weighted_edges} | {e[1] for e in weighted_edges}
    dist = {n: dijkstra(weighted_edges, n) for n in nodes}
    best = {}
    for u, w, c in weighted_edges:
        for v, d in dist[w].items():
            if (u, v) not in best or c + d < best[(u, v)]:
                best[(u, v)] = c + d
    return {(u, v, d) for (u, v), d in best.items()}


def min_label_components(undirected_edges) -> set[tuple]:
    """(node, smallest node id of its connected component)."""
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in undirected_edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups = defaultdict(list)
    for n in list(parent):
        groups[find(n)].append(n)
    return {(n, min(members)) for members in groups.values() for n in members}


def count_paths_dag(edges, start) -> dict:
    """Number of distinct paths from start to every node reachable from it (a DAG; parallel
    edges of a set count once, as in a SQL table read with set semantics)."""
    succ = successors(set(edges))
    order, seen = [], set()

    def visit(n):  # reverse postorder = topological order
        if n in seen:
            return
        seen.add(n)
        for m in succ[n]:
            visit(m)
        order.append(n)

    visit(start)
    count = defaultdict(int)
    count[start] = 1
    for n in reversed(order):
        for m in succ[n]:
            count[m] += count[n]
    return dict(count)


def same_generation(parent_child) -> set[tuple]:
    """sg(X,Y) <- pc(P,X), pc(P,Y), X != Y.   sg(X,Y) <- pc(A,X), sg(A,B), pc(B,Y)."""
    children = defaultdict(set)
    for p, c in parent_child:
        children[p].add(c)
    sg = {(x, y) for p in children for x in children[p] for y in children[p] if x != y}
    while True:
        new = {(x, y) for a, b in sg for x in children[a] for y in children[b]} - sg
        if not new:
            return sg
        sg |= new


def mlm_bonus(sales, sponsor, tol=1e-12) -> dict:
    """bonus(M) = 0.1 * sum of M's distinct sales rows + 0.5 * sum of bonus(M2) over sponsees."""
    own = defaultdict(float)
    for m, p in set(sales):
        own[m] += p * 0.1
    sponsees = defaultdict(set)
    for m1, m2 in sponsor:
        sponsees[m1].add(m2)
    members = set(own) | set(sponsees)
    bonus = {}
    while True:
        new = {}
        for m in members:
            parts = [bonus[s] * 0.5 for s in sponsees[m] if s in bonus]
            if m in own or parts:
                new[m] = own.get(m, 0.0) + sum(parts)
        if new.keys() == bonus.keys() and all(abs(new[k] - bonus[k]) <= tol for k in new):
            return new
        bonus = new


def coalesce_intervals(intervals) -> set[tuple]:
    """Maximal unions of overlapping or touching closed intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return {tuple(x) for x in out}


def bom_max_days(assbl, basic) -> dict:
    """Days until a part is ready: its own basic days, or the max over its subparts."""
    subs = defaultdict(set)
    for part, sub in assbl:
        subs[part].add(sub)
    days = dict(basic)
    result = {}

    def ready(part):
        if part not in result:
            values = [ready(s) for s in subs[part] if ready(s) is not None]
            if part in days:
                values.append(days[part])
            result[part] = max(values) if values else None
        return result[part]

    for part in set(subs) | set(days):
        ready(part)
    return {p: d for p, d in result.items() if d is not None}


def org_size(report) -> dict:
    """count() as in DIALECT's worked example: every employee counts 1 for itself, and a manager
    sums its direct reports' counts (a manager who reports to nobody does not count itself)."""
    reports = defaultdict(set)
    emps = set()
    for mgr, emp in report:
        reports[mgr].add(emp)
        emps.add(emp)
    memo = {}

    def size(n):
        if n not in memo:
            memo[n] = (1 if n in emps else 0) + sum(size(e) for e in reports[n])
        return memo[n]

    return {n: size(n) for n in emps | set(reports)}


def parity_reach(edges, start) -> tuple[set, set]:
    """Nodes reachable from start by a walk of even length (incl. 0) and of odd length."""
    succ = successors(edges)
    seen = {(start, 0)}
    stack = [(start, 0)]
    while stack:
        node, parity = stack.pop()
        for nxt in succ[node]:
            state = (nxt, 1 - parity)
            if state not in seen:
                seen.add(state)
                stack.append(state)
    return {n for n, p in seen if p == 0}, {n for n, p in seen if p == 1}
