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
from recsql.executor.loop.action import aggregate_map_bits
from recsql.executor.strategies.rollover import MAX_SLICES, slice_count
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
    # DuckDB scans the pulled relations in place; the state has several tables, an iteration's
    # candidates and hash tables
    assert held_bytes(1000, 0) > held_bytes(0, 1000) > held_bytes(0, 0)


MiB = 1 << 20
# Measured by `python -m benchmarks drivermem` (FINDINGS.md, "Driver memory per estimated byte"):
# a session's first statement in a fresh process, recsql's defaults, the endgame's whole fixpoint
# on the driver: (case, relations' estimated bytes, the final state's estimated bytes, the Python
# process's peak RSS growth over its RSS before the statement).
MEASURED = [
    ("sssp rmat-12", 53_315 * 24, 2_929 * 16, 16 * MiB),
    ("cc rmat-14", 426_240 * 24, 12_446 * 16, 37 * MiB),
    ("cc rmat-16", 1_819_260 * 24, 46_815 * 16, 121 * MiB),
    ("sssp rmat-18", 3_938_974 * 24, 148_712 * 16, 226 * MiB),
    ("cc rmat-18", 7_609_518 * 24, 174_005 * 16, 483 * MiB),
    ("sssp rmat-20", 16_085_507 * 24, 546_118 * 16, 918 * MiB),
    ("cc rmat-20", 31_403_924 * 24, 646_074 * 16, 1928 * MiB),
    ("tc rmat-10", 12_070 * 24, 652_029 * 16, 197 * MiB),
    ("tc rmat-12", 53_315 * 24, 8_710_859 * 16, 2970 * MiB),
]


@pytest.mark.parametrize("case, relations, state, peak", MEASURED, ids=[m[0] for m in MEASURED])
def test_a_driver_budget_below_the_measured_peak_does_not_keep_the_fixpoint(case, relations, state, peak):
    # the driver stops before the start (the relations) or, at the latest, once its state
    # reaches the size the statement's did (the driver then hands it back to Spark)
    assert not fits_driver([], 0, held_bytes(state, relations), peak - 1, False, DEFAULTS)


def test_sssp_at_rmat_22_takes_the_driver_only_with_room_for_its_measured_growth():
    # 65.2M edges of three BIGINTs (1.57 GB as Arrow); at 2^18 and 2^20 the statement's peak
    # growth was 2.5x the relations' bytes for SSSP: about 3.6 GiB here, and the endgame takes no
    # more than half the available memory (the JVM grows into the rest)
    relations = 65_245_540 * 24
    assert held_bytes(0, relations) >= 2.5 * relations
    assert fits_driver([], 65_245_540, held_bytes(0, relations), driver_budget(0, 11 * GiB), False, DEFAULTS)
    # with 8 GiB available (an 8g JVM and other processes on a 24 GiB machine) the Spark loop
    assert not fits_driver([], 65_245_540, held_bytes(0, relations), driver_budget(0, 8 * GiB), False, DEFAULTS)
    # and a budget the relations fit, but not the final state (2.0M rows), hands back to Spark
    budget = driver_budget(0, int(10.5 * GiB))
    assert fits_driver([], 65_245_540, held_bytes(0, relations), budget, False, DEFAULTS)
    assert not fits_driver([], 67_251_920, held_bytes(2_006_380 * 16, relations), budget, False, DEFAULTS)


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


@pytest.mark.parametrize("rows, bits", [
    (0, 16), (1, 16), (32_768, 16),  # Spark's own map below 2^15 rows: its buckets cost small statements
    (32_769, 17), (65_536, 17), (174_005, 19),  # twice the relation's rows (RMAT 2^18: 174,005 vertices)
    (546_700, 20), (4_000_000, 20),  # at most 2^20: the map's page holds about 1.6M groups anyway
])
def test_the_aggregate_map_holds_twice_the_relation_from_2_15_rows_up_to_2_20(rows, bits):
    assert aggregate_map_bits(rows) == bits
