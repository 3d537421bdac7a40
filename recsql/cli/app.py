"""The `recsql` command: spark-sql's flags, duckdb-style output formats, an interactive shell."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import click
from pyspark.sql import SparkSession

import recsql
from recsql.cli import failures, output, plot, script, tables
from recsql.cli.progress import Reporter
from recsql.cli.runner import ScriptRunner, Sink
from recsql.cli.shell import BANNER, Shell
from recsql.settings import KEYS, PREFIX, REPLACED

HELP = """Run recursive SQL (RaSQL: aggregates in the recursion) on Apache Spark.

\b
  recsql -f examples/sssp.sql --stats          run a script
  recsql -e "SELECT ..." --table g=edges.tsv.gz  one statement over a file
  recsql                                       interactive shell
  recsql serve --port 10000                    JDBC/ODBC server for BI tools (--help)

Result rows go to standard output (a table on a terminal, tab-separated when piped);
notices, timings and progress go to standard error. Exit codes: 0 success, 1 query
error, 2 usage error, 130 interrupted.
"""


def parse_conf(ctx, param, values: tuple[str, ...]) -> dict[str, str]:
    conf = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE")
        key = key.strip()
        if key.startswith(PREFIX) and key[len(PREFIX):] in REPLACED:
            raise click.BadParameter(f"{key} was removed; use {REPLACED[key[len(PREFIX):]]}")
        if key.startswith(PREFIX) and key[len(PREFIX):] not in KEYS:
            known = ", ".join(PREFIX + k for k in KEYS)
            raise click.BadParameter(f"unknown recsql setting {key}; known: {known}")
        conf[key] = value.strip()
    return conf


def parse_tables(ctx, param, values: tuple[str, ...]) -> list[tables.TableSpec]:
    return [tables.parse_spec(value) for value in values]


@dataclass
class Options:
    script: str | None
    execute: str | None
    file: str | None
    init: tuple[str, ...]
    master: str | None
    conf: dict[str, str]
    name: str
    silent: bool
    verbose: bool
    tables: list[tables.TableSpec]
    format: str | None
    output: str | None
    overwrite: bool
    header: bool | None
    stats: bool
    plot: str | None
    resume: bool = False

    @property
    def recsql_conf(self) -> dict[str, str]:
        return {k: v for k, v in self.conf.items() if k.startswith(PREFIX)}

    @property
    def spark_conf(self) -> dict[str, str]:
        return {k: v for k, v in self.conf.items() if not k.startswith(PREFIX)}


@click.command(help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("script_path", metavar="[SCRIPT]", required=False,
                type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("-e", "execute", metavar="SQL", help="Run these statements (separated by ';').")
@click.option("-f", "file", metavar="FILE", type=click.Path(exists=True, dir_okay=False,
              allow_dash=True), help="Run the script FILE ('-' reads standard input).")
@click.option("-i", "init", metavar="FILE", multiple=True,
              type=click.Path(exists=True, dir_okay=False),
              help="Run FILE first, without printing its results (repeatable).")
@click.option("--master", metavar="URL", help="Spark master (default: the active session, "
              "else an embedded local[*]).")
@click.option("-c", "--conf", multiple=True, metavar="K=V", callback=parse_conf,
              help="A setting (repeatable): spark.recsql.* tune recsql, the rest go to Spark.")
@click.option("--name", default="recsql", show_default=True, help="Spark application name.")
@click.option("-S", "--silent", is_flag=True, help="No notices, timings or progress line.")
@click.option("-v", "--verbose", is_flag=True,
              help="Echo statements, log every iteration, show tracebacks.")
@click.option("--table", "tables_", metavar="NAME=PATH[:SCHEMA]", multiple=True,
              callback=parse_tables, help="Register a csv/tsv/json/parquet file (.gz too) as a "
              "view; SCHEMA is Spark DDL, e.g. 'src BIGINT, dst BIGINT' (repeatable).")
@click.option("--format", "fmt", type=click.Choice(output.FORMATS), help="Result format "
              "(default: table on a terminal, tab-separated without header otherwise).")
@click.option("-o", "--output", metavar="PATH", type=click.Path(dir_okay=False),
              help="Write the last statement's result to PATH (atomically).")
@click.option("--overwrite", is_flag=True, help="Let --output and --plot replace a file.")
@click.option("--header/--no-header", default=None,
              help="Header line for csv/tsv (default: yes with --format, no when piped).")
@click.option("--stats", is_flag=True, help="Per-iteration table on stderr after each result.")
@click.option("--plot", metavar="FILE.png", type=click.Path(dir_okay=False),
              help="Draw delta rows per iteration (log scale), one line per recursive CTE.")
@click.option("--resume", is_flag=True, help="Continue recursive queries from the checkpoints an "
              "interrupted run of the same statements left (spark.recsql.checkpointDir).")
@click.version_option(recsql.__version__, "--version", prog_name="recsql",
                      message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, script_path, execute, file, init, master, conf, name, silent, verbose,
        tables_, fmt, output, overwrite, header, stats, plot, resume) -> None:
    options = Options(script_path, execute, file, init, master, conf, name, silent, verbose,
                      tables_, fmt, output, overwrite, header, stats, plot, resume)
    source = pick_source(options)
    check_outputs(options)
    quiet_libraries()
    reporter = Reporter(silent=silent, verbose=verbose)
    ctx.exit(run(options, source, reporter))


def pick_source(options: Options) -> script.Source | None:
    """-e, -f or SCRIPT (at most one); none means the shell, or standard input when piped."""
    given = [x for x in (options.execute, options.file, options.script) if x is not None]
    if len(given) > 1:
        raise click.UsageError("give only one of -e, -f and SCRIPT")
    if options.execute is not None:
        return script.from_text(options.execute)
    if given:
        return script.from_file(given[0])
    if not sys.stdin.isatty():
        return script.from_stdin()
    if options.output:
        raise click.UsageError("--output needs a query (-e, -f or SCRIPT)")
    return None


def check_outputs(options: Options) -> None:
    fmt = output.choose_format(options.format, options.output, False)
    if fmt == "parquet" and not options.output:
        raise click.UsageError("--format parquet writes a file: give --output PATH")
    for path in (options.output, options.plot):
        if path:
            output.check_target(path, options.overwrite)


def run(options: Options, source: script.Source | None, reporter: Reporter) -> int:
    """Start (or reuse) Spark, register tables, run init files then the script or the shell."""
    spark = None
    try:
        with _errors_reported(reporter, options.verbose):
            spark = start(options, reporter)
            _INTERRUPTS.watch(spark)
            runner = make_runner(options, spark, reporter)
            for path in options.init:
                runner.run_source(script.from_file(path), show=False)
            if source is None:
                interact(runner, spark, reporter, options)
            else:
                runner.run_source(source, sink=make_sink(options))
            draw_plot(options, runner, reporter)
    except KeyboardInterrupt:
        _INTERRUPTS.handled()
        failures.cancel_jobs(spark)
        reporter.error("Interrupted: the running Spark jobs were cancelled")
        return failures.INTERRUPTED
    except _Failed:
        return failures.QUERY_ERROR
    return failures.OK


class _Interrupts:
    """Ctrl-C while a statement runs.

    pyspark's own SIGINT handler calls cancelAllJobs() inside the handler, on the main thread's
    Py4J connection, which is most often in the middle of a call waiting for a job: the read is
    re-entered, the cancel fails ("reentrant call", then a Py4JError) and the job runs on. And a
    KeyboardInterrupt raised where Python drops exceptions (a weakref callback or `__del__`, which
    Py4J's objects run at any allocation) is lost: the statement would go on, iteration after
    iteration. So the handler only raises, and a thread of its own (its own Py4J connection)
    cancels the session's jobs, again every half second until the statement has unwound: whatever
    the interrupt hit, the statement's next Spark job fails, and that failure reads as the
    interrupt."""

    def __init__(self) -> None:
        self.spark: SparkSession | None = None
        self.unwound: threading.Event | None = None  # set once the interrupted statement unwound
        self.canceller: threading.Thread | None = None

    def watch(self, spark: SparkSession) -> None:
        """Installed after the session starts, since pyspark installs its handler then."""
        if threading.current_thread() is threading.main_thread():
            self.spark = spark
            signal.signal(signal.SIGINT, self._handler)

    @property
    def pending(self) -> bool:
        return self.unwound is not None

    def handled(self) -> None:
        """The interrupted statement has unwound: stop cancelling, the next one may run."""
        if self.unwound is not None and self.canceller is not None:
            self.unwound.set()
            # a cancel still on its way to Spark would hit the next statement's jobs
            self.canceller.join()
            self.unwound = self.canceller = None

    def _handler(self, signum, frame) -> None:
        if self.unwound is None:
            self.unwound = threading.Event()
            self.canceller = threading.Thread(target=self._cancel_until, args=(self.spark, self.unwound),
                                              name="recsql-cancel", daemon=True)
            self.canceller.start()
        raise KeyboardInterrupt

    @staticmethod
    def _cancel_until(spark: SparkSession | None, unwound: threading.Event) -> None:
        while True:
            failures.cancel_jobs(spark)
            if unwound.wait(0.5):
                return


_INTERRUPTS = _Interrupts()


class _Failed(Exception):
    """A statement failed and was reported."""


@contextlib.contextmanager
def _errors_reported(reporter: Reporter, verbose: bool) -> Iterator[None]:
    try:
        yield
    except (KeyboardInterrupt, click.ClickException, click.exceptions.Exit):
        raise
    except Exception as error:  # noqa: BLE001 - every failure is reported, spark-sql style
        if _INTERRUPTS.pending:
            # Ctrl-C inside a Py4J call can surface as a Py4JError instead of KeyboardInterrupt,
            # and a cancelled job as a failed one.
            raise KeyboardInterrupt from None
        reporter.error(failures.render(error, verbose))
        raise _Failed() from None


def start(options: Options, reporter: Reporter) -> SparkSession:
    spark = recsql.session(master=options.master, app_name=options.name, **options.spark_conf)
    for spec in options.tables:
        df = tables.register(spark, spec)
        reporter.notice(f"Registered {spec.name}({', '.join(df.columns)}) from {spec.path}")
    return spark


def make_runner(options: Options, spark: SparkSession, reporter: Reporter) -> ScriptRunner:
    terminal = sys.stdout.isatty()
    fmt = output.choose_format(options.format, None, terminal)
    header = options.header if options.header is not None else options.format is not None
    return ScriptRunner(spark=spark, reporter=reporter, format=fmt, header=header,
                  recsql_conf=options.recsql_conf, show_stats=options.stats,
                  resume=options.resume)


def make_sink(options: Options) -> Sink | None:
    if not options.output:
        return None
    fmt = output.choose_format(options.format, options.output, False)
    header = options.header if options.header is not None else fmt in ("csv", "tsv")
    return Sink(options.output, fmt, header, options.overwrite)


def interact(runner: ScriptRunner, spark: SparkSession, reporter: Reporter, options: Options) -> None:
    def run_text(text: str) -> None:
        _INTERRUPTS.handled()  # a Ctrl-C at the prompt interrupted no statement
        try:
            with _errors_reported(reporter, options.verbose):
                runner.run_source(script.from_text(text))
        except _Failed:
            pass

    def interrupted() -> None:
        _INTERRUPTS.handled()
        failures.cancel_jobs(spark)
        reporter.error("Interrupted: the running Spark jobs were cancelled")

    reporter.notice(BANNER.format(version=recsql.__version__, spark=spark.version))
    Shell(run_text, interrupted).loop()


def draw_plot(options: Options, runner: ScriptRunner, reporter: Reporter) -> None:
    if options.plot:
        lines = plot.draw(runner.runs, options.plot, overwrite=options.overwrite)
        reporter.notice(f"Wrote the convergence plot ({lines} CTE line(s)) to {options.plot}")


def quiet_libraries() -> None:
    """sqlglot logs a warning for every statement it hands to Spark unparsed; recsql does not
    need to repeat that to the user."""
    logging.getLogger("sqlglot").setLevel(logging.ERROR)


__all__ = ["Options", "cli"]
