"""The Spark session recsql runs on: the caller's, the active one, or an embedded local one.

Also the session hygiene of a run: settings recsql changes for its iterations are restored
afterwards, also after an error.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession

from recsql.errors import RecSQLEnvironmentError

MIN_JAVA = 17
INSTALL_JAVA = (
    "install a Java 17 or newer runtime (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`; "
    "macOS: `brew install openjdk@17`; or any JDK 17+ from adoptium.net) and put it on PATH or "
    "set JAVA_HOME to it"
)

QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")

# Sensible local settings for the embedded session (overridable by `session(**conf)`).
LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": str(max(4, 2 * (os.cpu_count() or 2))),
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": os.environ.get("RECSQL_DRIVER_MEMORY", "4g"),
    "spark.sql.session.timeZone": "UTC",
}


def session(master: str | None = None, app_name: str = "recsql", **conf: str) -> SparkSession:
    """The active SparkSession, or a new embedded local one (`local[*]`) with local settings.

    Keyword arguments are Spark conf keys with dots replaced by underscores, or pass a dict:
    `session(**{"spark.sql.shuffle.partitions": "8"})`.
    """
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        for key, value in conf.items():
            active.conf.set(_conf_key(key), str(value))
        return active
    if master is None or master.startswith("local"):
        check_java()
    builder = SparkSession.builder.master(master or "local[*]").appName(app_name)
    # errors only from the JVM we start (its start-up warnings are noise to a user)
    quiet_jvm = {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"}
    settings = {**LOCAL_DEFAULTS, **quiet_jvm, **{_conf_key(k): v for k, v in conf.items()}}
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    with contextlib.suppress(Exception):  # Connect sessions have no SparkContext
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def _conf_key(key: str) -> str:
    return key if "." in key else key.replace("_", ".")


def resolve(spark: SparkSession | None) -> SparkSession:
    return spark if spark is not None else session()


def check_java() -> None:
    """Stop before Spark's opaque JAVA_GATEWAY_EXITED when no usable Java is installed."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    where = f"JAVA_HOME={java_home}" if java_home else "java on PATH"
    if not java or not os.path.exists(java):
        raise RecSQLEnvironmentError(
            f"Spark needs Java {MIN_JAVA}+, but none was found ({where}: not found); {INSTALL_JAVA}",
            condition="RECSQL_JAVA_NOT_FOUND",
        )
    version = java_version(java)
    if version is None or version < MIN_JAVA:
        found = f"Java {version}" if version else "a java that does not report its version"
        raise RecSQLEnvironmentError(
            f"Spark needs Java {MIN_JAVA}+, but {java} is {found}; {INSTALL_JAVA}",
            condition="RECSQL_JAVA_TOO_OLD",
        )


def java_version(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major  # "1.8" -> 8


@contextlib.contextmanager
def overridden_conf(spark: SparkSession, settings: dict[str, str],
                    known: dict[str, str | None] | None = None) -> Iterator[None]:
    """Set session conf keys for the duration of a run; restore (or unset) them afterwards.
    `known`: the session's values of some of the keys (None: unset), already read by the
    caller, so not asked for again (each read is a round trip to Spark)."""
    known = known or {}
    before = {key: known[key] if key in known else spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


@contextlib.contextmanager
def cancellable(spark: SparkSession, label: str) -> Iterator[None]:
    """Tag the run's Spark operations; on Ctrl-C (KeyboardInterrupt) interrupt them promptly
    instead of letting running jobs finish in the background."""
    tag = f"recsql-{label}-{os.getpid()}-{id(object())}"
    spark.addTag(tag)
    try:
        yield
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            spark.interruptTag(tag)
        raise
    finally:
        with contextlib.suppress(Exception):
            spark.removeTag(tag)
