"""The executor's strategy decisions on plain numbers (no Spark): whether the driver runs the
fixpoint, and how many slices roll-over cuts an iteration into. The join-side vote and the
heavy-key choice have theirs in test_joinside.py and test_skew.py."""

from __future__ import annotations

import pytest

from recsql.executor.endgame import fits_driver
from recsql.executor.rollover import MAX_SLICES, slice_count
from recsql.settings import Settings

DEFAULTS = Settings()
TAIL_ONLY = Settings(endgame_max_delta_rows=100, endgame_max_driver_rows=10_000)


def test_by_default_whatever_fits_the_driver_runs_there_from_the_start():
    # a single-source query on a 955k-edge graph: one delta row, not yet known to shrink
    assert fits_driver([1], state_rows=1, base_rows=955_298, not_growing=False, settings=DEFAULTS)
    # connected components on 1.8M edges: the whole vertex set is the first delta
    assert fits_driver([46_815], 46_815, 1_819_260, False, DEFAULTS)


def test_more_than_the_driver_budget_stays_on_spark():
    assert not fits_driver([1], 1, 2_000_000, True, DEFAULTS)
    assert not fits_driver([10], 1_999_995, 10, True, DEFAULTS)


def test_a_smaller_delta_budget_waits_for_the_tail():
    # the problem is larger than the delta budget: only a delta that stopped growing moves
    assert not fits_driver([50], 500, 5_000, False, TAIL_ONLY)
    assert fits_driver([50], 500, 5_000, True, TAIL_ONLY)
    # a delta above its budget never moves, growing or not
    assert not fits_driver([101], 500, 5_000, True, TAIL_ONLY)
    # a problem no larger than the delta budget moves at once
    assert fits_driver([1], 10, 90, False, TAIL_ONLY)


def test_every_cte_delta_must_fit():
    assert not fits_driver([1, 101], 10, 10, True, TAIL_ONLY)


@pytest.mark.parametrize("estimates, budget, largest_delta, expected", [
    ([0], 1000, 5, 1),             # nothing to join: one piece
    ([1000], 1000, 50, 1),         # exactly the budget: one piece
    ([1001], 1000, 50, 2),         # just over: two slices
    ([10_000, 35_000], 1000, 10_000, 35),  # the largest CTE decides
    ([10**9], 1, 10**9, MAX_SLICES),       # bounded by MAX_SLICES
    ([10**6], 10, 3, 3),           # never more slices than delta rows
])
def test_slice_count(estimates, budget, largest_delta, expected):
    assert slice_count(estimates, budget, largest_delta) == expected
