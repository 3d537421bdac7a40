"""Running a notebook in a real IPython kernel (nbclient) that imports this checkout's recsql,
on a small local Spark session like the suite's; and reading what its cells show."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# cell, client -> None: runs beside the cell while it executes (an interrupt, a snapshot)
Watcher = Callable[[object, NotebookClient], None]


def execute(notebook, cwd: Path = EXAMPLES, watchers: dict[str, Watcher] | None = None,
            driver_memory: str = "1g") -> None:
    """Execute every cell in one kernel; a cell whose source is a key of `watchers` has that
    watcher running beside it in a thread."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "RECSQL_DRIVER_MEMORY": driver_memory}
    client = NotebookClient(notebook, timeout=1200, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    with client.setup_kernel(env=env):
        for index, cell in enumerate(notebook.cells):
            watcher = (watchers or {}).get(cell.source)
            thread = None
            if watcher is not None:
                thread = threading.Thread(target=watcher, args=(cell, client))
                thread.start()
            client.execute_cell(cell, index)
            if thread is not None:
                thread.join()


def interrupt(client: NotebookClient) -> None:
    """As Jupyter's interrupt button: SIGINT to the kernel's process group (Spark's JVM ignores
    it, as pyspark starts it)."""
    asyncio.run(client.km.interrupt_kernel())


def wait_for_progress(cell, pattern: str, seconds: float = 600) -> bool:
    """Wait until the cell's live progress display matches `pattern`; whether it did."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if re.search(pattern, progress(cell) or ""):
            return True
        time.sleep(0.1)
    return False


def progress(cell) -> str | None:
    """The text of the cell's live progress display (its final state once the cell ran)."""
    for output in list(cell.outputs):
        text = output.get("data", {}).get("text/plain", "")
        if text.startswith("recsql: "):
            return text
    return None
