"""Virtualenvs for the real clients (dbt, Superset), built from PyPI by the tests themselves.

dbt and Superset pin libraries that pyspark's environment also uses, so each gets a virtualenv
of its own, made from a lock file in this folder (every package pinned) and cached under
$RECSQL_CLIENTS_CACHE (default ~/.cache/recsql-clients) in a folder named by the lock file's
hash: a changed pin builds a new one, an unchanged one is reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
CACHE = Path(os.environ.get("RECSQL_CLIENTS_CACHE", Path.home() / ".cache" / "recsql-clients"))


def venv(name: str) -> Path:
    """The virtualenv of `requirements-<name>.txt`, built on first use (a few minutes)."""
    lock = HERE / f"requirements-{name}.txt"
    key = hashlib.sha256(lock.read_bytes() + sys.version.encode()).hexdigest()[:12]
    home = CACHE / f"{name}-{key}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}-{key}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one build at a time; the others then reuse it
        if not (home / "complete").exists():
            build(home, lock)
    return home


def build(home: Path, lock: Path) -> None:
    # in place: a venv's scripts name its own path, so it cannot be built elsewhere and moved;
    # `complete` is written last, so a half-built venv is never used
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    done = subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", "-r", str(lock)],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise AssertionError(f"building {home} failed:\n{done.stdout}\n{done.stderr}")
    (home / "complete").write_text(lock.read_text())
