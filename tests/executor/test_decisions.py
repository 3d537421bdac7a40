"""The executor's strategy decisions on plain numbers (no Spark): whether the driver runs the
fixpoint, and how many slices roll-over cuts an iteration into. The join-side vote and the
heavy-key choice have theirs in test_joinside.py and test_skew.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyspark.sql.types import (
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from recsql.errors import RecSQLError
from recsql.executor.endgame.decide import (
    AVAILABLE_SHARE,
    UNKNOWN_AVAILABLE,
    VARIABLE_WIDTH,
    driver_budget,
    fits_driver,
    held_bytes,
    pull_fits,
    row_bytes,
)
from recsql.executor.rollover import MAX_SLICES, slice_count
from recsql.settings import Settings

DEFAULTS = Settings()
TAIL_ONLY = Settings(endgame_max_delta_rows=100)
GiB = 1 << 30
NO_SESSION_CONF = SimpleNamespace(conf={})  # what Settings.read reads of a session: nothing set
EDGES = StructType([StructField(c, LongType()) for c in ("Src", "Dst", "Cost")])


def test_a_relation_is_sized_from_its_schema():
    assert row_bytes(EDGES) == 24
    assert row_bytes(StructType([StructField("a", IntegerType()), StructField("s", StringType()),
                                 StructField("d", DecimalType(10, 2))])) == 4 + VARIABLE_WIDTH + 16


def test_rmat_20_fits_a_driver_with_a_few_gib_available():
    # SSSP at RMAT 2^20: 16.1M edges of three BIGINTs (386 MB as Arrow), 646k vertices of state
    budget = driver_budget(0, available=8 * GiB)
    assert budget == 4 * GiB
    held = held_bytes(646_074 * 16, 16_085_507 * 24)
    assert fits_driver([1], 16_085_507, held, budget, False, DEFAULTS)
    # the symmetric graph of CC at 2^20: 31.4M edges, the whole vertex set as the first delta
    held = held_bytes(646_074 * 16, 31_403_924 * 24)
    assert fits_driver([646_074], 32_049_998, held, budget, False, DEFAULTS)
    # with only 1 GiB available it stays on Spark
    assert not fits_driver([1], 16_085_507, held, driver_budget(0, available=GiB), False, DEFAULTS)


def test_the_budget_follows_the_setting_else_the_available_memory():
    assert driver_budget(512 << 20, available=64 * GiB) == 512 << 20  # the setting wins
    assert driver_budget(0, available=64 * GiB) == 32 * GiB  # a larger driver takes more
    assert driver_budget(0, available=None) == int(UNKNOWN_AVAILABLE * AVAILABLE_SHARE)


def test_the_state_counts_more_per_byte_than_the_relations():
    # DuckDB scans the pulled relations in place; the state has several tables and hash tables
    assert held_bytes(0, 1000) == 1500
    assert held_bytes(1000, 0) == 4000


def test_more_than_the_driver_budget_stays_on_spark():
    assert not fits_driver([1], 2, 1001, 1000, True, DEFAULTS)
    assert fits_driver([1], 2, 1000, 1000, False, DEFAULTS)


def test_a_relation_larger_than_spark_lets_one_action_collect_stays_on_spark():
    assert pull_fits(GiB, GiB)
    assert not pull_fits(GiB + 1, GiB)
    assert pull_fits(10 * GiB, 0)  # spark.driver.maxResultSize=0: no limit


def test_a_delta_row_limit_waits_for_the_tail():
    # the problem is larger than the delta limit: only a delta that stopped growing moves
    assert not fits_driver([50], 5_500, 0, GiB, False, TAIL_ONLY)
    assert fits_driver([50], 5_500, 0, GiB, True, TAIL_ONLY)
    # a delta above the limit never moves, growing or not
    assert not fits_driver([101], 5_500, 0, GiB, True, TAIL_ONLY)
    # a problem no larger than the limit moves at once
    assert fits_driver([1], 100, 0, GiB, False, TAIL_ONLY)
    # by default there is no delta limit
    assert fits_driver([10**9], 10**9, 0, GiB, False, DEFAULTS)


def test_every_cte_delta_must_fit():
    assert not fits_driver([1, 101], 20, 0, GiB, True, TAIL_ONLY)


@pytest.mark.parametrize("text, size", [("4g", 4 * GiB), ("512m", 512 << 20), ("1048576", 1 << 20),
                                        ("64KB", 64 << 10), ("auto", 0), (" AUTO ", 0)])
def test_driver_memory_setting(text, size):
    assert Settings.read(NO_SESSION_CONF, {"spark.recsql.endgame.driverMemory": text}).endgame_driver_memory == size


@pytest.mark.parametrize("text", ["0", "lots", "-1g", "4x", ""])
def test_driver_memory_setting_refuses_nonsense(text):
    with pytest.raises(RecSQLError, match=r"endgame.driverMemory.*512m or 4g"):
        Settings.read(NO_SESSION_CONF, {"spark.recsql.endgame.driverMemory": text})


def test_the_row_budget_key_was_replaced():
    with pytest.raises(RecSQLError, match=r"maxDriverRows was removed; use spark.recsql.endgame.driverMemory"):
        Settings.read(NO_SESSION_CONF, {"spark.recsql.endgame.maxDriverRows": "5"})


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
