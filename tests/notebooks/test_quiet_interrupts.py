"""What Py4J logs while a cell is interrupted stays off the notebook (`magic._quiet_py4j_interrupts`),
and what it logs otherwise does not. The records are the ones Py4J's `GatewayClient.send_command`
writes to the root logger (py4j/java_gateway.py)."""

from __future__ import annotations

import logging

from recsql.notebook.magic import _quiet_py4j_interrupts


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def logged(*messages: str) -> list[str]:
    root, kept = logging.getLogger(), Kept()
    root.addHandler(kept)
    try:
        with _quiet_py4j_interrupts():
            for message in messages:
                logging.error(message)  # as Py4J does: the module-level function, on the root logger
    finally:
        root.removeHandler(kept)
    return kept.messages


def test_a_connection_lost_to_the_interrupt_is_not_logged():
    assert logged("KeyboardInterrupt while sending command.", "Exception while sending command.") == []


def test_a_lost_connection_without_an_interrupt_is_logged():
    assert logged("Exception while sending command.", "something else") == [
        "Exception while sending command.", "something else"]
