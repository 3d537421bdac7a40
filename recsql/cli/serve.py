"""`recsql serve`: the HiveServer2 (Thrift JDBC/ODBC) server for BI tools, with the CLI's Spark
flags and --table; `recsql serve --add-user NAME` writes a password file entry."""

from __future__ import annotations

import importlib.util
import signal
import threading
import time

import click

import recsql
from recsql.cli import tables
from recsql.cli.app import parse_conf, parse_tables, quiet_libraries
from recsql.server import auth
from recsql.settings import PREFIX

HELP = """Serve recursive SQL to JDBC/ODBC clients and BI tools over the HiveServer2 protocol
(what Spark's Thrift server speaks): beeline, DBeaver, Superset, dbt-spark, PyHive, Power BI.

\b
  recsql serve --port 10000 --table "edge=data/edges.csv"
  beeline -u jdbc:hive2://127.0.0.1:10000/default -n analyst
  recsql serve --add-user analyst --password-file users.txt
  recsql serve --auth password --password-file users.txt --host 0.0.0.0

The catalog lasts, as on Spark's Thrift server: a Hive metastore (embedded Derby, metastore_db/)
and the warehouse (spark-warehouse/) in the working directory, unless -c gives another
(spark.hadoop.hive.metastore.uris=thrift://..., or spark.sql.catalogImplementation=in-memory).

Serves until SIGINT or SIGTERM, then cancels running operations and exits 0. docs/server.md
has the client set-ups.
"""

CATALOG = "spark.sql.catalogImplementation"
METASTORE_HELP = (
    "the Hive metastore of recsql serve could not start ({reason}). The embedded one (Derby, "
    "metastore_db/ in the working directory) serves one process at a time: stop the other server "
    "or Spark using it, start in another directory, or give a shared metastore with "
    "-c spark.hadoop.hive.metastore.uris=thrift://HOST:9083 (-c {catalog}=in-memory: a catalog "
    "that is lost at exit)")


@click.command(help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=10000, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0: any free port, printed at start).")
@click.option("--transport", type=click.Choice(auth.TRANSPORTS), default="binary",
              show_default=True, help="binary (SASL PLAIN and noSasl on one port) or http.")
@click.option("--http-path", default="cliservice", show_default=True,
              help="URL path of the http transport.")
@click.option("--auth", "auth_mode", type=click.Choice(auth.AUTH), default="none",
              show_default=True, help="none: any user and password; password: the password file.")
@click.option("--password-file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Salted password hashes (written by --add-user).")
@click.option("--add-user", metavar="NAME", help="Add or replace NAME in --password-file "
              "(asks for the password) and exit.")
@click.option("--ssl-cert", metavar="FILE", type=click.Path(exists=True, dir_okay=False),
              help="TLS certificate (PEM); with --ssl-key.")
@click.option("--ssl-key", metavar="FILE", type=click.Path(exists=True, dir_okay=False),
              help="TLS private key (PEM).")
@click.option("--insecure", is_flag=True, help="Allow a non-loopback --host without --auth.")
@click.option("--idle-session-timeout", default=3600.0, show_default=True, type=float,
              metavar="SECONDS", help="Close client sessions idle this long.")
@click.option("--master", metavar="URL", help="Spark master (default: an embedded local[*]).")
@click.option("-c", "--conf", multiple=True, metavar="K=V", callback=parse_conf,
              help="A setting (repeatable): spark.recsql.* apply to every client session.")
@click.option("--name", default="recsql-serve", show_default=True, help="Spark application name.")
@click.option("--table", "tables_", metavar="NAME=PATH[:SCHEMA]", multiple=True,
              callback=parse_tables, help="A file every client session sees as a view (repeatable).")
def serve(host, port, transport, http_path, auth_mode, password_file, add_user, ssl_cert, ssl_key,
          insecure, idle_session_timeout, master, conf, name, tables_) -> None:
    if add_user:
        return write_user(add_user, password_file)
    try:
        auth.check_options(host, transport, auth_mode, password_file, ssl_cert, ssl_key, insecure)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    missing = [m for m in ("thrift", "TCLIService") if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException('recsql serve needs the server extra: '
                                   f'pip install "recsql[server]" (missing: {", ".join(missing)})')
    quiet_libraries()
    recsql_conf = {k: v for k, v in conf.items() if k.startswith(PREFIX)}
    spark_conf = {CATALOG: "hive", **{k: v for k, v in conf.items() if not k.startswith(PREFIX)}}
    spark = recsql.session(master=master, app_name=name, **spark_conf)
    open_catalog(spark)
    for spec in tables_:  # once on the start session: a bad file fails here, not per client
        df = tables.register(spark, spec)
        click.echo(f"Registered {spec.name}({', '.join(df.columns)}) from {spec.path}", err=True)

    def init(session) -> None:
        for key, value in recsql_conf.items():
            session.conf.set(key, value)
        for spec in tables_:
            tables.register(session, spec)

    server = recsql.serve(spark=spark, host=host, port=port, transport=transport,
                          http_path=http_path, auth=auth_mode, password_file=password_file,
                          ssl_cert=ssl_cert, ssl_key=ssl_key, insecure=insecure,
                          idle_session_timeout=idle_session_timeout, init=init)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    click.echo(f"recsql serve: listening on {host}:{server.port} ({transport}, auth {auth_mode}"
               f"{', TLS' if server.tls else ''}); beeline -u '{server.url}'", err=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        click.echo("recsql serve: stopping (running operations are cancelled)", err=True)
        server.stop()


def open_catalog(spark) -> None:
    """Start the catalog now (a Hive metastore takes seconds), so the first client does not wait
    for it and a metastore that cannot start stops the server with the reason."""
    started = time.monotonic()
    try:
        spark.catalog.listDatabases()
    except Exception as error:  # noqa: BLE001 - Py4J or analysis errors of the metastore client
        reason = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
        raise click.ClickException(METASTORE_HELP.format(reason=reason, catalog=CATALOG)) from None
    kind = spark.conf.get(CATALOG, "in-memory")
    click.echo(f"recsql serve: {kind} catalog ready in {time.monotonic() - started:.1f} s", err=True)


def write_user(user: str, password_file: str | None) -> None:
    if not password_file:
        raise click.UsageError("--add-user needs --password-file FILE")
    password = click.prompt(f"Password for {user}", hide_input=True, confirmation_prompt=True,
                            err=True)
    try:
        auth.add_user(password_file, user, password)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    click.echo(f"Wrote {user} to {password_file} (salted scrypt hash)", err=True)


