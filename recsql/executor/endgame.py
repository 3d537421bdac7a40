"""Endgame (Afrati et al. section 8): once a fixpoint's delta is tiny, an iteration on Spark costs
more than its work. When the state and the base rows fit the driver budget, the rest of the
fixpoint runs on the driver.

Placeholder: `applies` is False until the driver-side evaluator lands.
"""

from __future__ import annotations


def applies(run) -> bool:
    return False


def finish_on_driver(run, iteration: int) -> None:
    raise NotImplementedError
