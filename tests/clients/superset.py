"""Apache Superset 6.1 in its own virtualenv, served on 127.0.0.1 by gunicorn, with a SQLite
metadata database, and a client of its REST API (login -> JWT, CSRF token, session cookie).
Used by test_superset.py and benchmarks/superset.py."""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from tests.clients.process import terminate
from tests.clients.venvs import venv
from tests.conftest import REPO

ADMIN = ("admin", "admin-password-for-tests")

# The settings docs/server.md recommends for recsql (the rest is what a test instance needs)
CONFIG = """
SECRET_KEY = {secret!r}
SQLALCHEMY_DATABASE_URI = "sqlite:///{home}/superset.db"
{poll}
TALISMAN_ENABLED = False
RATELIMIT_ENABLED = False
CACHE_CONFIG = {{"CACHE_TYPE": "NullCache"}}
DATA_CACHE_CONFIG = {{"CACHE_TYPE": "NullCache"}}
"""


# Superset's Hive engine polls a running query every 5 s by default, so every SQL Lab query and
# chart took at least 5 s; HIVE_POLL_INTERVAL is the deprecated name of this setting
POLL = 'DB_POLL_INTERVAL_SECONDS = {"hive": 0.05}'


class Superset:
    def __init__(self, home: Path, poll: str = POLL):
        self.home = home
        self.venv = venv("superset")
        self.log = home / "superset.log"
        self.process: subprocess.Popen | None = None
        self.url = ""
        (home / "superset_config.py").write_text(CONFIG.format(secret=secrets.token_hex(32), home=home, poll=poll))
        self.env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                    "SUPERSET_CONFIG_PATH": str(home / "superset_config.py"), "FLASK_APP": "superset",
                    "SUPERSET_HOME": str(home)}

    def run(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run([str(self.venv / "bin" / args[0]), *args[1:]], cwd=self.home, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-4000:]}\n"
                                 f"{done.stderr[-4000:]}")
        return done.stdout + done.stderr

    def install_recsql_dialect(self) -> None:
        """recsql without its dependencies: the dialect needs only PyHive and SQLAlchemy."""
        self.run("pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--force-reinstall",
                 str(REPO))

    def set_up(self) -> Superset:
        """recsql's dialect, and a metadata database with an admin (made once per virtualenv by
        `superset db upgrade`, `fab create-admin` and `init`, minutes; then copied)."""
        template = self.venv / "metadata-template.db"
        with open(self.venv / "metadata-template.lock", "w") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)  # one set-up at a time changes the shared venv
            self.install_recsql_dialect()
            if not template.exists():
                self.run("superset", "db", "upgrade")
                self.run("superset", "fab", "create-admin", "--username", ADMIN[0], "--firstname", "Ada",
                         "--lastname", "Admin", "--email", "admin@example.com", "--password", ADMIN[1])
                self.run("superset", "init")
                shutil.copyfile(self.home / "superset.db", template.with_suffix(".partial"))
                template.with_suffix(".partial").rename(template)
            else:
                shutil.copyfile(template, self.home / "superset.db")
        return self

    def start(self) -> Superset:
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [str(self.venv / "bin" / "gunicorn"), "--bind", "127.0.0.1:0", "--workers", "1",
                 "--threads", "4", "--timeout", "300", "--no-control-socket",  # not a socket shared by every gunicorn
                 "superset.app:create_app()"],
                cwd=self.home, env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            self.url = self.wait_until_healthy(deadline=time.monotonic() + 240)
        except BaseException:  # interrupted too: never leave a server behind
            self.stop()
            raise
        return self

    def wait_until_healthy(self, deadline: float) -> str:
        import requests

        url = ""
        while time.monotonic() < deadline:
            if not url and (match := re.findall(r"Listening at: (http://127\.0\.0\.1:\d+)", self.log.read_text())):
                url = match[-1]
            if self.process.poll() is not None:
                raise AssertionError(f"gunicorn exited:\n{self.log.read_text()[-4000:]}")
            try:  # the app loads in the worker after the bind
                if url and requests.get(f"{url}/health", timeout=10).status_code == 200:
                    return url
            except requests.RequestException:  # refused, or a timeout while the worker loads the app
                pass
            time.sleep(0.5)
        raise AssertionError(f"Superset not healthy within 240 s:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        terminate(self.process)


class SupersetAPI:
    """Superset's REST API as a logged-in admin: a JWT, and the CSRF token with its session cookie."""

    def __init__(self, url: str):
        import requests

        self.url = url
        self.http = requests.Session()
        login = self.http.post(f"{url}/api/v1/security/login", json={
            "username": ADMIN[0], "password": ADMIN[1], "provider": "db", "refresh": True}, timeout=60)
        login.raise_for_status()
        self.http.headers["Authorization"] = f"Bearer {login.json()['access_token']}"
        csrf = self.http.get(f"{url}/api/v1/security/csrf_token/", timeout=60)
        csrf.raise_for_status()
        self.http.headers.update({"X-CSRFToken": csrf.json()["result"], "Referer": url})

    def call(self, method: str, path: str, expect: int = 200, **kwargs) -> dict:
        response = self.http.request(method, f"{self.url}/api/v1/{path}", timeout=300, **kwargs)
        assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text[:4000]}"
        return response.json()

    def add_database(self, name: str, uri: str) -> int:
        return self.call("POST", "database/", expect=201, json={
            "database_name": name, "sqlalchemy_uri": uri, "expose_in_sqllab": True, "allow_dml": True,
            "allow_run_async": False})["id"]

    def tables(self, database: int, schema: str) -> list[dict]:
        return self.call("GET", f"database/{database}/tables/",
                         params={"q": f"(force:!t,schema_name:{schema})"})["result"]

    def sql_lab(self, database: int, schema: str, sql: str) -> dict:
        return self.call("POST", "sqllab/execute/", json={
            "database_id": database, "schema": schema, "sql": sql, "runAsync": False,
            "client_id": secrets.token_hex(5), "queryLimit": 10000, "tab": "recsql"})

    def add_dataset(self, database: int, schema: str, name: str, sql: str) -> int:
        return self.call("POST", "dataset/", expect=201, json={
            "database": database, "schema": schema, "table_name": name, "sql": sql})["id"]

    def chart_data(self, dataset: int, columns: list[str]) -> list[dict]:
        answer = self.call("POST", "chart/data", json={
            "datasource": {"id": dataset, "type": "table"}, "result_format": "json", "result_type": "full",
            "queries": [{"columns": columns, "metrics": [], "row_limit": 10000, "orderby": []}]})
        return answer["result"][0]["data"]
