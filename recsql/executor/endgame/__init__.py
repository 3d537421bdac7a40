"""Endgame (Afrati et al. section 8): once a fixpoint's delta is tiny, an iteration on Spark costs
more than its work. When the state and the base rows fit the driver budget, the rest of the
fixpoint runs on the driver, in an in-process DuckDB, with the Spark states' exact semantics.

`applies(run)` decides (cheaply: the base relations are counted once per run, and only once the
delta is small); `finish_on_driver(run, iteration)` pulls the states and every relation the
recursive branches read as Arrow, runs the remaining semi-naive iterations in DuckDB (same delta
rules, same head types, same set / min-max / contributor-sum / bag merges, same sum tolerance,
same maxIterations error) and puts the results back as the states' `all`. It returns False and
leaves the run untouched when a branch cannot be translated, DuckDB fails on it, or the driver
fixpoint outgrows the budgets (then the Spark loop simply continues).

When it applies (all settings `spark.recsql.endgame.*`):
* what the driver would hold, the state and the relations the recursive branches read (their
  bytes estimated from schema and row count, `decide.held_bytes`), fits the driver budget:
  `driverMemory`, by default a share of the memory available when it decides;
* with a `maxDeltaRows` limit (none by default): every CTE's delta is at most that, and the
  fixpoint is in its tail (the group's delta did not grow in the last Spark iteration) or the
  whole problem (state plus relations) is no larger than it.

From the start: when every branch (base branches included) is translatable, no head is a
sum/count, and the relations all branches read fit, the whole fixpoint runs on the driver, base
step included (`Driver.run_whole`): the relations are read from Spark once and no other Spark job
runs. A base table's pulled rows become a native table of the application's DuckDB database, kept
across statements (`database`, with `bases.py` deciding when a copy is current); each statement
runs on its own cursor of that database, its states in its temporary tables.

Should the states outgrow the budget on the driver (or a delta `maxDeltaRows`), the driver hands
Spark its states as of its last complete iteration, delta included, and the Spark loop continues
from there: no work is lost (the endgame is asked again after at least one Spark iteration).
DuckDB's memory limit is the budget less the relations registered as Arrow (a completed CTE's
rows): past it DuckDB spills to a temporary directory, and should it fail even so, the attempt
is dropped and Spark continues from where the states were.

One module per job: `decide` (whether the driver takes over), `translate` (a recursive branch as
DuckDB SQL), `merges` (each state class's merge in DuckDB), `database` (the application's DuckDB
database and its kept base copies), `driver` (the driver loop and the runner the Spark loop
composes).
"""

from __future__ import annotations

from recsql.executor.endgame.decide import RunInfo, applies, applies_from_start, fits_driver
from recsql.executor.endgame.driver import Driver, finish_on_driver

__all__ = ["Driver", "RunInfo", "applies", "applies_from_start", "finish_on_driver", "fits_driver"]
