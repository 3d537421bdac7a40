"""Stopping a client's or server's process the way a user would: SIGTERM, then SIGKILL."""

from __future__ import annotations

import signal
import subprocess


def terminate(process: subprocess.Popen | None) -> None:
    if process and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
