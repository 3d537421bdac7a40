"""Measurement helpers: the Spark session, machine/version facts, peak memory, run timing.

Peak resident memory is read from /proc (no psutil needed): before each run the harness writes
"5" to /proc/<pid>/clear_refs, which resets the kernel's peak-RSS counter (VmHWM), and after the
run reads VmHWM, for the Python driver and for its JVM child (the `java` process whose parent is
this Python process). If the reset is not permitted, VmHWM is the peak since process start and the
report says so.
"""
from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone


# ---------------------------------------------------------------- Spark session
def start_spark(shuffle_partitions: int, driver_memory: str = "8g", ui: bool = False):
    """Create the shared local[2] session; returns (spark, seconds to session, seconds to first job).
    The web UI (and its REST API, which `spark_jobs` reads) is off unless `ui`."""
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]")
             .appName("recsql-benchmarks")
             .config("spark.driver.memory", driver_memory)
             .config("spark.ui.enabled", str(ui).lower())
             .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    t1 = time.perf_counter()
    spark.range(1).count()
    t2 = time.perf_counter()
    return spark, t1 - t0, t2 - t1


def spark_jobs(spark) -> list[tuple[float, float]]:
    """(submitted, completed) epoch seconds of every completed job Spark's UI still holds, as its
    REST API reports them (millisecond resolution; needs `start_spark(..., ui=True)`)."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/jobs?status=succeeded"
    with urllib.request.urlopen(url) as response:
        jobs = json.load(response)

    def epoch(stamp: str) -> float:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=timezone.utc).timestamp()

    return [(epoch(j["submissionTime"]), epoch(j["completionTime"])) for j in jobs]


def job_seconds(jobs: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds Spark spent running the jobs submitted between epoch seconds `start` and `end`."""
    return sum(done - submitted for submitted, done in jobs if start <= submitted <= end)


# ---------------------------------------------------------------- what wrote a results file
COMMAND: str | None = None  # the runner's command line, set by `python -m benchmarks`


def command() -> str:
    """The command that is writing the results (as typed, from the repository root)."""
    if COMMAND:
        return COMMAND
    return " ".join(["python", *sys.argv])


def stamp(started_load: str | None = None, spark=None) -> list[str]:
    """The lines every results file opens with (Markdown bullets): the command, the commit, the
    machine, the load average (at the start, if given, and now), the versions."""
    m = machine()
    load_line = (f"{started_load} at the start, {m['load_start']} at the end" if started_load
                 else f"{m['load_start']} when written")
    versions_ = versions(spark)
    commit = versions_.pop("recsql commit")
    return [
        f"- command: `{command()}` (from the repository root)",
        f"- commit: {commit}",
        f"- machine: {m['cores']} cores, {m['memory_gib']:.1f} GiB, {m['cpu']}, {m['os']}; load "
        f"average (1/5/15 min) {load_line}; other engineers' processes share the cores",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions_.items() if v != "?"),
    ]


# ---------------------------------------------------------------- machine and versions
def machine() -> dict:
    model = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_gib = int(line.split()[1]) / 2**20
    except OSError:
        pass
    return {"cores": os.cpu_count(), "memory_gib": mem_gib, "cpu": model, "load_start": load(),
            "os": f"{platform.system()} {platform.release()}"}


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def versions(spark=None) -> dict:
    import duckdb
    import networkx
    import numpy
    import pyarrow
    import pyspark
    import scipy

    java = "?"
    if spark is not None:
        jvm = spark.sparkContext._jvm
        java = f"{jvm.System.getProperty('java.version')} ({jvm.System.getProperty('java.vm.name')})"
    else:
        try:
            out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
            java = out.splitlines()[0]
        except OSError:
            pass
    return {"recsql commit": _commit(), "python": platform.python_version(), "pyspark": pyspark.__version__,
            "spark": spark.version if spark is not None else "?", "java": java,
            "duckdb": duckdb.__version__, "scipy": scipy.__version__, "numpy": numpy.__version__,
            "networkx": networkx.__version__, "pyarrow": pyarrow.__version__}


def _commit() -> str:
    """The repository's HEAD (with `+changes` when the tree differs from it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", ":/recsql", ":/benchmarks"], cwd=here,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
    return (head or "?") + ("+changes" if dirty else "")


# ---------------------------------------------------------------- peak memory
def _children_named(pid: int, name: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        m = re.match(r"\d+ \((.*)\) \S (\d+)", stat)
        if m and int(m.group(2)) == pid and m.group(1) == name:
            out.append(int(entry))
    return out


def _status_kib(pid: int, key: str) -> int | None:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def heap_used_mib(pid: int) -> float | None:
    """A JVM's heap in use (eden + survivors + old, garbage included) as `jstat -gc` reports it,
    or None without a JDK."""
    try:
        out = subprocess.run(["jstat", "-gc", str(pid)], capture_output=True, text=True,
                             check=False).stdout.splitlines()
    except OSError:
        return None
    if len(out) < 2:
        return None
    row = dict(zip(out[0].split(), out[1].split()))
    try:
        return sum(float(row[k]) for k in ("S0U", "S1U", "EU", "OU")) / 1024
    except (KeyError, ValueError):
        return None


class PeakMemory:
    """Peak RSS of the Python driver and its JVM, per run."""

    def __init__(self):
        self.py = os.getpid()
        self.jvm = None
        self.resettable = True

    def find_jvm(self):
        kids = _children_named(self.py, "java")
        self.jvm = kids[0] if kids else None

    def reset(self):
        for pid in (self.py, self.jvm):
            if pid is None:
                continue
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as fh:
                    fh.write("5")
            except OSError:
                self.resettable = False

    def read(self) -> dict:
        """Peak RSS in MiB since the last reset."""
        py = _status_kib(self.py, "VmHWM")
        jvm = _status_kib(self.jvm, "VmHWM") if self.jvm else None
        return {"py_mib": py / 1024 if py else None, "jvm_mib": jvm / 1024 if jvm else None}


# ---------------------------------------------------------------- timing
class Watchdog:
    """Calls `cancel` once if the run is still going at `seconds`."""

    def __init__(self, seconds: float, cancel):
        self.timer = threading.Timer(seconds, cancel)
        self.timer.daemon = True

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()


@dataclass
class Summary:
    median: float
    low: float
    high: float
    n: int


def summarize(xs: list[float]) -> Summary | None:
    if not xs:
        return None
    return Summary(statistics.median(xs), min(xs), max(xs), len(xs))
