"""recsql's settings: Spark conf keys (`SET spark.recsql.x=...`, `--conf`), overridable per call.

One table of keys, defaults and parsers; `Settings.read` resolves them in the order
per-call override > session conf > default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recsql.errors import RecSQLError


def _bool(value: str) -> bool:
    text = str(value).strip().lower()
    if text in {"true", "1", "yes", "on"}:
        return True
    if text in {"false", "0", "no", "off"}:
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return number


def _non_negative_float(value: str) -> float:
    number = float(value)
    if number < 0:
        raise ValueError(f"expected a non-negative number, got {value!r}")
    return number


def _positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise ValueError(f"expected a positive number, got {value!r}")
    return number


# The join strategies a user may force with spark.recsql.joinStrategy (the executor's
# joinside.py decides among them per iteration when it is `auto`).
BROADCAST_DELTA, BROADCAST_BASE, SHUFFLE = "broadcast-delta", "broadcast-base", "shuffle"
STRATEGIES = (BROADCAST_DELTA, BROADCAST_BASE, SHUFFLE)


# Spark's byte-size suffixes (`spark.driver.memory=4g`), binary multiples as Spark reads them
_BYTE_UNITS = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def byte_size(value: str) -> int:
    """`512m`, `4g`, `1048576` (bytes) as Spark writes sizes."""
    text = str(value).strip().lower()
    number = text.rstrip("kmgtb")
    unit = text[len(number):] or "b"
    if not number.isdigit() or unit not in _BYTE_UNITS:
        raise ValueError(f"expected a size such as 512m or 4g, got {value!r}")
    return int(number) * _BYTE_UNITS[unit]


def _driver_memory(value: str) -> int:
    """`auto` (0: sized from the memory available when the endgame decides) or a positive size."""
    if str(value).strip().lower() == "auto":
        return 0
    size = byte_size(value)
    if size < 1:
        raise ValueError(f"expected auto or a positive size such as 512m or 4g, got {value!r}")
    return size


def _join_strategy(value: str) -> str:
    text = str(value).strip().lower()
    if text != "auto" and text not in STRATEGIES:
        raise ValueError(f"expected auto or one of {', '.join(STRATEGIES)}, got {value!r}")
    return text


# key suffix -> (attribute, default, parser, meaning)
KEYS: dict[str, tuple[str, Any, Callable[[str], Any], str]] = {
    "maxIterations": ("max_iterations", 10000, _positive_int,
                      "iterations a fixpoint may take before recsql stops with an error"),
    "sumTolerance": ("sum_tolerance", 1e-9, _non_negative_float,
                     "relative change below which a floating-point sum/count contributor is unchanged"),
    "broadcastRows": ("broadcast_rows", 50000, int,
                      "a delta of at most this many rows is broadcast to the join (0: never)"),
    "partitions": ("partitions", 0, int,
                   "partitions of the recursive state (0: spark.sql.shuffle.partitions, locally at most 1 per core)"),
    "lookup.enabled": ("lookup_enabled", True, _bool,
                       "a delta of at most 32 rows reads only the base rows it joins (its keys, "
                       "observed by the action that made it, pick the cached batches of the base)"),
    "index.enabled": ("index_enabled", True, _bool,
                      "the partitioned base copy is kept grouped by its join key, and a delta "
                      "joined with it on that key reads only the rows it joins (the join, then "
                      "the lists unnested)"),
    "joinStrategy": ("join_strategy", "auto", _join_strategy,
                     "auto (vote of the partitions) or force broadcast-delta, broadcast-base, shuffle"),
    "endgame.enabled": ("endgame_enabled", True, _bool,
                        "run a fixpoint on the driver (DuckDB) when its data fit there"),
    "endgame.driverMemory": ("endgame_driver_memory", 0, _driver_memory,
                             "bytes the driver fixpoint may hold (its state and the relations it "
                             "reads, estimated from their schemas and row counts): auto (a share of "
                             "the memory available when it decides) or a size such as 4g"),
    "endgame.maxDeltaRows": ("endgame_max_delta_rows", 0, _non_negative_int,
                             "0: whatever fits driverMemory runs on the driver from the start; N: "
                             "only a delta of at most N rows moves there, and a problem of more "
                             "than N rows only once its delta stops growing"),
    "base.keep": ("base_keep", 4, _non_negative_int,
                  "base tables kept (partitioned, or pulled to the driver) for later statements "
                  "over the same unchanged input (0: each statement makes its own)"),
    "doubling.afterIterations": ("doubling_after_iterations", 8, _non_negative_int,
                                 "a linear transitive closure still running after this many "
                                 "iterations switches to recursive doubling (0: never)"),
    # off by default: watching for heavy keys costs up to 8% of a Spark-loop run with none to
    # split (29-70% under load), and splitting saved no time on local[2] (benchmarks/FINDINGS.md,
    # benchmarks/RESULTS-rmat16-sssp-cc.md as of commit c5609db)
    "skew.enabled": ("skew_enabled", False, _bool,
                     "split heavy join keys of a delta's join with a base table over all partitions"),
    "skew.threshold": ("skew_threshold", 0.25, _positive_float,
                       "a join key is heavy above this multiple of the rows per partition"),
    "skew.minRows": ("skew_min_rows", 10000, _non_negative_int,
                     "a heavy join key also has at least this many rows"),
    "skew.maxKeys": ("skew_max_keys", 16, _positive_int,
                     "most heavy keys looked for per join and iteration"),
    "rollover.maxRows": ("rollover_max_rows", 0, _non_negative_int,
                         "an iteration whose estimated join output exceeds this many rows runs "
                         "in slices, each merged before the next (0: never)"),
    "demand.enabled": ("demand_enabled", True, _bool,
                       "push the final query's filters on a recursive CTE or view into its base "
                       "branches where the recursion carries the filtered column unchanged"),
    # on by default since the continued fixpoint starts on the driver (endgame/seeded.py): faster
    # than recomputing in every case measured (benchmarks/RESULTS-refresh.md)
    "refresh.incremental": ("refresh_incremental", True, _bool,
                            "REFRESH MATERIALIZED VIEW continues the stored fixpoint after appends "
                            "where that is proven equal to a recompute, instead of recomputing"),
    "checkpointInterval": ("checkpoint_interval", 50, _non_negative_int,
                           "iterations between reliable checkpoints of the recursive state "
                           "(0: none; only with a checkpoint directory)"),
    "checkpointDir": ("checkpoint_dir", "", str,
                      "where reliable checkpoints go (empty: the session's spark.checkpoint.dir; "
                      "neither: no reliable checkpoints)"),
}
PREFIX = "spark.recsql."

# keys that were replaced, with what replaces them: setting one is an error, never ignored
REPLACED = {
    "endgame.maxDriverRows": "spark.recsql.endgame.driverMemory, a size in bytes (such as 4g) "
                             "or auto, sized from the memory available",
}


@dataclass(frozen=True)
class Settings:
    max_iterations: int = 10000
    sum_tolerance: float = 1e-9
    broadcast_rows: int = 50000
    partitions: int = 0
    lookup_enabled: bool = True
    index_enabled: bool = True
    join_strategy: str = "auto"
    endgame_enabled: bool = True
    endgame_driver_memory: int = 0  # bytes; 0: auto
    endgame_max_delta_rows: int = 0  # 0: no limit
    base_keep: int = 4
    doubling_after_iterations: int = 8
    skew_enabled: bool = False
    skew_threshold: float = 0.25
    skew_min_rows: int = 10000
    skew_max_keys: int = 16
    rollover_max_rows: int = 0
    demand_enabled: bool = True
    refresh_incremental: bool = True
    checkpoint_interval: int = 50
    checkpoint_dir: str = ""

    @classmethod
    def read(cls, spark, overrides: dict[str, Any] | None = None) -> Settings:
        overrides = dict(overrides or {})
        session = _session_values(spark)
        for suffix, replacement in REPLACED.items():
            key = PREFIX + suffix
            if key in overrides or session(key) is not None:
                raise RecSQLError(
                    f"{key} was removed; use {replacement}", condition="RECSQL_INVALID_SETTING")
        values = {}
        for suffix, (attr, default, parse, _) in KEYS.items():
            key = PREFIX + suffix
            raw = overrides.pop(key, None)
            if raw is None:
                raw = session(key)
            if raw is None:
                values[attr] = default
                continue
            try:
                values[attr] = parse(raw)
            except ValueError as error:
                raise RecSQLError(
                    f"Invalid value for {key}: {error}", condition="RECSQL_INVALID_SETTING"
                ) from None
        unknown = [k for k in overrides if k.startswith(PREFIX)]
        if unknown:
            known = ", ".join(PREFIX + k for k in KEYS)
            raise RecSQLError(
                f"Unknown setting {unknown[0]}; known settings: {known}",
                condition="RECSQL_INVALID_SETTING",
            )
        return cls(**values)


def _session_values(spark) -> Callable[[str], str | None]:
    """How a key's value in the session is read (None: not set). A Spark Connect session sends
    every key it has set in one RPC (`conf.getAll`) instead of one RPC per key. Classic pyspark
    builds `getAll`'s dict over Py4J entry by entry, several times the round trips of reading
    the keys one by one (benchmarks/FINDINGS.md, the tiny statement), so it reads them so."""
    if type(spark).__module__.startswith("pyspark.sql.connect."):
        return spark.conf.getAll.get
    return lambda key: spark.conf.get(key, None)
