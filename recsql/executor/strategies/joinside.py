"""Which side of a delta's join moves, decided per iteration by a vote of the partitions
(PARALAGG IV-D, Algorithm 1).

Before an iteration each partition compares its share of the delta with its share of the other
side (a pre-partitioned base table): a partition whose delta rows, replicated to every partition,
are still fewer than its base rows votes to broadcast the delta; one whose base rows, replicated,
are fewer than its delta rows votes to broadcast the base; the others vote to shuffle. A strict
majority decides; without one the join is shuffled (in place, when the delta and the base are
co-partitioned). The partition sizes come from the previous iteration's one action.
"""

from __future__ import annotations

from collections import Counter

from recsql.settings import BROADCAST_BASE, BROADCAST_DELTA, SHUFFLE, STRATEGIES

__all__ = ["BROADCAST_BASE", "BROADCAST_DELTA", "SHUFFLE", "STRATEGIES", "decide", "partition_vote", "vote"]


def partition_vote(delta_rows: int, base_rows: int, partitions: int) -> str:
    """One partition's vote.

    >>> partition_vote(1, 1000, 4), partition_vote(1000, 2, 4), partition_vote(50, 60, 4)
    ('broadcast-delta', 'broadcast-base', 'shuffle')
    """
    if delta_rows * partitions <= base_rows:
        return BROADCAST_DELTA
    if base_rows * partitions <= delta_rows:
        return BROADCAST_BASE
    return SHUFFLE


def vote(delta_parts: list[int], base_parts: list[int]) -> str:
    """The majority decision over partitions; SHUFFLE without a strict majority.

    >>> vote([0, 1, 0, 2], [100, 90, 120, 80])
    'broadcast-delta'
    >>> vote([500, 400, 0, 0], [1, 1, 50, 60])
    'shuffle'
    """
    n = len(delta_parts)
    if n == 0 or len(base_parts) != n:
        return SHUFFLE
    tally = Counter(partition_vote(d, b, n) for d, b in zip(delta_parts, base_parts))
    choice, count = tally.most_common(1)[0]
    return choice if count * 2 > n else SHUFFLE


def decide(
    delta_parts: list[int] | None,
    base_parts: list[int] | None,
    delta_rows: int,
    base_rows: int | None,
    broadcast_rows: int,
    forced: str = "auto",
) -> str:
    """The strategy for one join: forced by setting, else the vote, else sizes alone; a side is
    broadcast only while it stays within `broadcast_rows` (driver and executor memory)."""
    if forced in STRATEGIES:
        return forced
    if delta_parts and base_parts:
        choice = vote(delta_parts, base_parts)
    else:
        choice = BROADCAST_DELTA if delta_rows <= broadcast_rows else SHUFFLE
    if choice == BROADCAST_DELTA and delta_rows > broadcast_rows:
        return SHUFFLE
    if choice == BROADCAST_BASE and (base_rows is None or base_rows > broadcast_rows):
        return SHUFFLE
    return choice
