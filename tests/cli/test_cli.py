"""The `recsql` command. Most tests call the click command in-process (CliRunner) on one shared
SparkSession; a few run the real executable (each starts a JVM) and one drives the interactive
shell through a pseudo-terminal."""

from __future__ import annotations

import gzip
import io
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

import recsql
from recsql import IterationStats
from recsql.cli import app, cli, failures, output, plot, shell
from recsql.cli.progress import Reporter
from recsql.cli.script import rewrite_paths
from recsql.cli.tables import has_header, parse_spec
from recsql.report import iteration_line, series

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = ROOT.parent / "shared" / "data" / "graphs"
RECSQL = [sys.executable, "-c", "from recsql.cli import main; main()"]

SSSP = """WITH recursive path (Dst, min() AS Cost) AS
    (SELECT 1, 0)
  UNION
    (SELECT g.Dst, path.Cost + g.Cost FROM path, g WHERE path.Dst = g.Src)
SELECT Dst, Cost FROM path ORDER BY Dst"""
TYPO = SSSP.replace("path.Cost + g.Cost", "path.Cst + g.Cost")
COUNTER = ("WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {n}) "
           "SELECT max(n) FROM r")


@pytest.fixture(scope="session")
def session_spark(request):
    """The project's `spark` fixture (tests/conftest.py) when there is one, else local[2]."""
    try:
        return request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        return recsql.session("local[2]", **{"spark.sql.shuffle.partitions": "4"})


@pytest.fixture
def edges(tmp_path) -> Path:
    path = tmp_path / "edges.csv"
    path.write_text("Src,Dst,Cost\n1,2,1\n2,3,2\n1,3,5\n3,4,1\n")
    return path


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def ok(*args: str, input: str | None = None):
    result = invoke(*args, input=input)
    assert result.exit_code == 0, result.stderr + repr(result.exception)
    return result


# -- no Spark needed ------------------------------------------------------------------------------

def test_version():
    result = ok("--version")
    assert result.stdout.strip() == f"recsql {recsql.__version__}"


@pytest.mark.parametrize("args, message", [
    (["-e", "SELECT 1", "-f", __file__], "only one of -e, -f and SCRIPT"),
    (["-c", "novalue", "-e", "SELECT 1"], "expected KEY=VALUE"),
    (["-c", "spark.recsql.maxIteration=3", "-e", "SELECT 1"], "unknown recsql setting"),
    (["--table", "g=/no/such/file.csv", "-e", "SELECT 1"], "no such file"),
    (["--table", "1g=x.csv", "-e", "SELECT 1"], "is not a table name"),
    (["--table", f"g={__file__}", "-e", "SELECT 1"], "unknown file type"),
    (["--format", "parquet", "-e", "SELECT 1"], "give --output PATH"),
    (["--format", "xml", "-e", "SELECT 1"], "Invalid value for '--format'"),
    (["-f", "/no/such/script.sql"], "does not exist"),
])
def test_usage_errors_exit_2(args, message):
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_existing_output_needs_overwrite(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("keep me")
    result = invoke("-e", "SELECT 1", "--output", str(target))
    assert result.exit_code == 2 and "--overwrite" in result.stderr
    assert target.read_text() == "keep me"


def test_rewrite_paths_makes_create_using_paths_absolute():
    base = "/srv/project"
    statement = "CREATE TEMP VIEW v USING csv OPTIONS (path 'data/x.csv', header 'true')"
    assert rewrite_paths(statement, base) == statement.replace("'data/x.csv'", "'/srv/project/data/x.csv'")
    assert "'/srv/project/t'" in rewrite_paths("CREATE TABLE t (a INT) USING csv LOCATION 't'", base)
    assert "'/srv/project/y.csv'" in rewrite_paths(
        "CREATE TEMP VIEW v USING csv OPTIONS (path = 'y.csv')", base)
    for unchanged in ["CREATE TEMP VIEW v USING csv OPTIONS (path '/abs/x.csv')",
                      "CREATE TEMP VIEW v USING csv OPTIONS (path 's3a://bucket/x.csv')",
                      "SELECT 'data/x.csv' AS path",
                      "CREATE TEMP VIEW v AS SELECT 'path' AS a, 'x' AS b"]:
        assert rewrite_paths(unchanged, base) == unchanged


@pytest.mark.parametrize("lines, sep, schema, expected", [
    (["Src,Dst", "1,2"], ",", None, True),
    (["1,2", "2,3"], ",", None, False),
    (["1\t2"], "\t", None, False),
    (["a\tb"], "\t", None, True),
    (["alice,bob", "carol,dan"], ",", None, False),
    (["name,friend", "alice,bob"], ",", "name STRING, friend STRING", True),
    (["alice,bob"], ",", "name STRING, friend STRING", False),
    (["src\tdst", "1\t2"], "\t", "src BIGINT, dst BIGINT", True),
    (["1\t2"], "\t", "src BIGINT, dst BIGINT", False),
    ([], ",", None, False),
])
def test_header_detection(lines, sep, schema, expected):
    assert has_header(lines, sep, schema) is expected


def test_table_spec_parsing(tmp_path):
    path = tmp_path / "e.tsv.gz"
    path.write_bytes(gzip.compress(b"1\t2\n"))
    spec = parse_spec(f"g={path}:src BIGINT, dst BIGINT")
    assert (spec.name, spec.path, spec.schema, spec.format[0]) == \
        ("g", str(path), "src BIGINT, dst BIGINT", "csv")
    assert parse_spec(f"g={path}").schema is None


def test_choose_format():
    assert output.choose_format(None, None, terminal=True) == "table"
    assert output.choose_format(None, None, terminal=False) == "tsv"
    assert output.choose_format(None, "x.parquet", terminal=True) == "parquet"
    assert output.choose_format("csv", "x.parquet", terminal=False) == "csv"


def test_shell_statement_completion():
    assert shell.complete("SELECT 1;")
    assert not shell.complete("SELECT 1")
    assert not shell.complete("SELECT ';")  # an open string literal
    assert shell.complete("SELECT\n  1\n;")
    assert shell.is_exit("exit;") and shell.is_exit("  QUIT ") and not shell.is_exit("exits")


def test_shell_feeds_complete_statements_and_survives_ctrl_c():
    ran, interrupted = [], []

    def run(text):
        ran.append(text)
        if "slow" in text:
            raise KeyboardInterrupt

    sh = shell.Shell(run, lambda: interrupted.append(True), history="/dev/null")
    buffer = sh.feed([], "SELECT")
    assert buffer == ["SELECT"] and ran == []
    assert sh.feed(buffer, "1;") == [] and ran == ["SELECT\n1;"]
    assert sh.feed([], "-- just a comment") == []
    assert sh.feed([], "SELECT slow;") == [] and interrupted == [True]


def test_error_rendering_without_and_with_traceback():
    try:
        raise recsql.RecSQLError("boom", condition="RECSQL_X")
    except recsql.RecSQLError as error:
        assert failures.render(error) == "[RECSQL_X] boom"
        assert "Traceback" in failures.render(error, verbose=True)
    assert failures.render(ValueError("x")).startswith("[RECSQL_INTERNAL_ERROR] ValueError: x")


STATS = [IterationStats("path", 0, 1, 1, 0.5, "-"), IterationStats("path", 1, 2, 3, 0.25, "broadcast"),
         IterationStats("path", 2, 0, 3, 0.1, "shuffle")]


def test_progress_line_only_on_a_terminal():
    terminal = io.StringIO()
    reporter = Reporter(console=Console(file=terminal, force_terminal=True, width=100))
    with reporter.progress("running") as on_iteration:
        for stats in STATS:
            on_iteration(stats)
    assert "\x1b[" in terminal.getvalue()  # a live, redrawn line
    piped = io.StringIO()
    reporter = Reporter(verbose=True, console=Console(file=piped, force_terminal=False))
    with reporter.progress("running") as on_iteration:
        for stats in STATS:
            on_iteration(stats)
    assert piped.getvalue().splitlines() == [iteration_line(s) for s in STATS]
    assert "\x1b[" not in piped.getvalue()
    silent = io.StringIO()
    with Reporter(silent=True, console=Console(file=silent, force_terminal=True)).progress("x") as cb:
        cb(STATS[0])
    assert silent.getvalue() == ""


def test_iteration_line():
    assert iteration_line(STATS[1]) == \
        "recsql: path iteration 1: 2 new rows, 3 total, broadcast join, 0.25 s"
    assert iteration_line(STATS[0]).startswith("recsql: path base step: 1 new rows")


def test_plot_series_and_png(tmp_path):
    other = [IterationStats("path", 0, 5, 5, 0.1, "-"), IterationStats("cc", 0, 3, 3, 0.1, "-")]
    lines = series([STATS, other])
    assert lines == {"path": [(0, 1), (1, 2), (2, 0)], "path #2": [(0, 5)], "cc": [(0, 3)]}
    target = tmp_path / "conv.png"
    assert plot.draw([STATS, other], str(target)) == 3
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["conv.png"]


def test_java_check_missing_java(monkeypatch, tmp_path):
    """`--master local[...]` always checks Java before starting Spark (no JVM is started here)."""
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    result = invoke("--master", "local[1]", "-e", "SELECT 1")
    assert result.exit_code == 1
    assert "[RECSQL_JAVA_NOT_FOUND]" in result.stderr
    assert "openjdk-17" in result.stderr and str(tmp_path / "no-jdk") in result.stderr
    assert "Traceback" not in result.stderr


def test_java_check_old_java(monkeypatch, tmp_path):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    result = invoke("--master", "local[1]", "-e", "SELECT 1")
    assert result.exit_code == 1
    assert "[RECSQL_JAVA_TOO_OLD]" in result.stderr and "Java 11" in result.stderr


# -- in-process on the shared session --------------------------------------------------------------

def test_piped_output_is_spark_sql_tsv(session_spark):
    result = ok("-e", "SELECT 1 AS a, CAST(NULL AS INT) AS b, 2.5D AS c, 'x y' AS d, "
                      "array(1, 2) AS e, true AS f; SELECT 7")
    assert result.stdout == "1\tNULL\t2.5\tx y\t[1, 2]\ttrue\n7\n"
    assert result.stderr.count("Time taken:") == 2


def test_silent_mode_prints_rows_only(session_spark):
    result = ok("-S", "-e", "SELECT 1")
    assert (result.stdout, result.stderr) == ("1\n", "")


def test_recursive_query_over_a_table_with_stats_and_verbose(session_spark, edges):
    result = ok("--table", f"g={edges}", "-e", SSSP, "--stats", "-v")
    assert result.stdout == "1\t0\n2\t1\n3\t3\n4\t4\n"
    err = result.stderr
    assert "Registered g(Src, Dst, Cost)" in err
    assert "recsql: path base step: 1 new rows, 1 total" in err
    assert re.search(r"recsql: path iteration 1: \d+ new rows", err)
    assert "delta rows" in err and "total rows" in err and "join" in err  # the --stats table
    assert "WITH recursive path" in err  # -v echoes the statement


def test_query_error_with_caret_exit_1(session_spark, edges):
    result = invoke("--table", f"g={edges}", "-e", TYPO)
    assert result.exit_code == 1
    assert result.stdout == ""
    err = result.stderr
    assert "[RECSQL_UNKNOWN_COLUMN]" in err and "(line 4, pos " in err
    assert "== SQL ==" in err
    caret = err.splitlines()[err.splitlines().index(TYPO.splitlines()[3]) + 1]
    assert re.fullmatch(r"-+\^+", caret)
    line = TYPO.splitlines()[3]
    assert line[caret.index("^"):len(caret)] == "Cst"  # the carets sit under the unknown name
    assert "Traceback" not in err


def test_verbose_error_shows_the_traceback(session_spark, edges):
    result = invoke("-v", "--table", f"g={edges}", "-e", TYPO)
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "[RECSQL_UNKNOWN_COLUMN]" in result.stderr


def test_script_stops_at_the_first_error(session_spark):
    result = invoke("-e", "SELECT 1; SELECT nope_column; SELECT 3")
    assert result.exit_code == 1
    assert result.stdout == "1\n"
    assert "nope_column" in result.stderr


def test_spark_error_renders_like_spark_sql(session_spark):
    result = invoke("-e", "SELECT nope_column")
    assert result.stderr.startswith("[UNRESOLVED_COLUMN.WITHOUT_SUGGESTION] A column")
    assert "(line 1, pos 7)" in result.stderr and "== SQL ==" in result.stderr


@pytest.mark.parametrize("fmt, expected", [
    ("csv", 'a,b\n1,"x,y"\n2,\n'),
    ("tsv", "a\tb\n1\tx,y\n2\tNULL\n"),
    ("json", '{"a":1,"b":"x,y"}\n{"a":2,"b":null}\n'),
])
def test_formats(session_spark, fmt, expected):
    query = "SELECT * FROM VALUES (1, 'x,y'), (2, NULL) AS t(a, b) ORDER BY a"
    assert ok("-S", "--format", fmt, "-e", query).stdout == expected
    if fmt != "json":
        assert ok("-S", "--format", fmt, "--no-header", "-e", query).stdout == \
            expected.split("\n", 1)[1]


def test_table_format(session_spark):
    out = ok("-S", "--format", "table", "-e",
             "SELECT * FROM VALUES (1, 'a[b]'), (22, NULL) AS t(num, txt)").stdout
    lines = out.splitlines()
    assert "num" in lines[1] and "txt" in lines[1]
    assert any("a[b]" in line and " 1 " in line for line in lines)
    assert any("NULL" in line and "22" in line for line in lines)


def test_explain_prints_the_plan_text(session_spark, edges):
    result = ok("-S", "--table", f"g={edges}", "-e", "EXPLAIN " + SSSP)
    assert "path" in result.stdout and "Physical Plan" in result.stdout.replace("physical plan",
                                                                                "Physical Plan")
    assert "\\n" not in result.stdout


def test_output_file_is_written_atomically(session_spark, tmp_path):
    target = tmp_path / "out.csv"
    result = ok("-e", "SELECT 1 AS a; SELECT 2 AS b UNION ALL SELECT 3", "--output", str(target))
    assert result.stdout == "1\n"  # only the last statement goes to the file
    assert target.read_text() == "b\n2\n3\n"
    assert "Wrote 2 row(s)" in result.stderr
    again = invoke("-e", "SELECT 9 AS c", "--output", str(target))
    assert again.exit_code == 2 and target.read_text() == "b\n2\n3\n"
    ok("-e", "SELECT 9 AS c", "--output", str(target), "--overwrite")
    assert target.read_text() == "c\n9\n"
    failed = invoke("-e", "SELECT raise_error('boom') AS c", "--output", str(target), "--overwrite")
    assert failed.exit_code == 1 and "boom" in failed.stderr
    assert target.read_text() == "c\n9\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_failed_query_leaves_no_file(session_spark, tmp_path, edges):
    target = tmp_path / "never.json"
    result = invoke("--table", f"g={edges}", "-e", TYPO, "--output", str(target))
    assert result.exit_code == 1
    assert list(tmp_path.iterdir()) == [edges]


def test_parquet_output(session_spark, tmp_path, edges):
    import pyarrow.parquet as pq

    target = tmp_path / "paths.parquet"
    ok("-S", "--table", f"g={edges}", "-e", SSSP, "--output", str(target))
    assert pq.read_table(target).to_pydict() == {"Dst": [1, 2, 3, 4], "Cost": [0, 1, 3, 4]}


def test_tables_headerless_gzip_with_comments_and_schema(session_spark, tmp_path):
    path = tmp_path / "edges.tsv.gz"
    path.write_bytes(gzip.compress(b"# a comment\n# nodes: 3\n1\t2\n2\t3\n"))
    result = ok("-S", "--table", f"g={path}", "-e", "SELECT _c0 + _c1 FROM g ORDER BY 1")
    assert result.stdout == "3\n5\n"
    result = ok("-S", "--table", f"g={path}:src BIGINT, dst BIGINT",
                "-e", "SELECT typeof(src), sum(dst) FROM g GROUP BY 1")
    assert result.stdout == "bigint\t5\n"


def test_tables_header_json_and_parquet(session_spark, tmp_path):
    (tmp_path / "p.csv").write_text("name,age\nann,31\nbob,42\n")
    (tmp_path / "p.json").write_text('{"name": "cy", "age": 7}\n')
    ok("-S", "--table", f"seed={tmp_path / 'p.csv'}", "-e", "SELECT * FROM seed",
       "--output", str(tmp_path / "p.parquet"))
    result = ok("-S", "--table", f"a={tmp_path / 'p.csv'}", "--table", f"b={tmp_path / 'p.json'}",
                "--table", f"c={tmp_path / 'p.parquet'}",
                "-e", "SELECT name, age FROM a UNION ALL SELECT name, age FROM b "
                      "UNION ALL SELECT name, age FROM c ORDER BY name, age")
    assert result.stdout == "ann\t31\nann\t31\nbob\t42\nbob\t42\ncy\t7\n"


def test_bad_schema_is_a_usage_error(session_spark, edges):
    result = invoke("--table", f"g={edges}:src BIGINTT", "-e", "SELECT 1")
    assert result.exit_code == 2 and "--table" in result.stderr


@pytest.mark.skipif(not (GRAPHS / "email-Eu-core.tsv.gz").exists(), reason="no shared graphs")
def test_shared_graph_edge_list_loads(session_spark):
    path = GRAPHS / "email-Eu-core.tsv.gz"
    with gzip.open(path, "rt") as stream:
        declared = next(int(line.split()[2]) for line in stream if line.startswith("# edges:"))
    result = ok("-S", "--table", f"g={path}:src BIGINT, dst BIGINT",
                "-e", "SELECT count(*), min(typeof(src)) FROM g")
    assert result.stdout == f"{declared}\tbigint\n"
    result = ok("-S", "--table", f"h={path}", "-e", "SELECT count(*), min(typeof(_c0)) FROM h")
    assert result.stdout == f"{declared}\tint\n"


def test_init_file_runs_first_without_printing(session_spark, tmp_path):
    init = tmp_path / "init.sql"
    init.write_text("CREATE OR REPLACE TEMP VIEW nums AS SELECT id FROM range(5);\nSELECT 42;\n")
    result = ok("-i", str(init), "-e", "SELECT count(*) FROM nums")
    assert result.stdout == "5\n"


def test_script_file_with_relative_paths_and_stdin(session_spark, tmp_path, edges):
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "e.csv").write_text(edges.read_text())
    text = ("CREATE OR REPLACE TEMP VIEW g USING csv OPTIONS (path 'data/e.csv', header 'true', "
            "inferSchema 'true');\n" + SSSP + ";\n")
    (folder / "q.sql").write_text(text)
    expected = "1\t0\n2\t1\n3\t3\n4\t4\n"
    assert ok("-S", "-f", str(folder / "q.sql")).stdout == expected
    assert ok("-S", str(folder / "q.sql")).stdout == expected
    assert ok("-S", "-", input="SELECT 1;\nSELECT 2;").stdout == "1\n2\n"
    assert ok("-S", "-f", "-", input="SELECT 3").stdout == "3\n"


def test_conf_routing(session_spark):
    result = invoke("-c", "spark.recsql.maxIterations=3", "-e", COUNTER.format(n=100))
    assert result.exit_code == 1
    assert "spark.recsql.maxIterations" in result.stderr and "3" in result.stderr
    assert session_spark.conf.get("spark.recsql.maxIterations", None) is None  # per run only
    assert ok("-S", "-c", "spark.recsql.maxIterations=3", "-e", COUNTER.format(n=2)).stdout == "2\n"
    result = ok("-S", "-c", "spark.recsqltest.flag=42", "-e", "SET spark.recsqltest.flag")
    assert result.stdout == "spark.recsqltest.flag\t42\n"
    session_spark.conf.unset("spark.recsqltest.flag")


def test_views_and_tables_from_recursive_queries(session_spark, tmp_path, edges):
    script = (f"CREATE VIEW reach_v AS {SSSP};\n"
              f"CREATE TABLE recsql_cli_paths USING parquet AS {SSSP};\n"
              f"INSERT INTO recsql_cli_paths {SSSP};\n"
              "SELECT count(*), sum(Cost) FROM recsql_cli_paths;\n"
              "SELECT count(*) FROM reach_v;\n")
    try:
        result = ok("-S", "--table", f"g={edges}", "-e", script)
    finally:
        session_spark.sql("DROP TABLE IF EXISTS recsql_cli_paths")
        session_spark.catalog.dropTempView("reach_v")
    assert result.stdout == "8\t16\n4\n"
    assert "WARNING: view reach_v refers to temporary view g" in result.stderr


def test_plot_flag(session_spark, tmp_path, edges):
    target = tmp_path / "conv.png"
    result = ok("--table", f"g={edges}", "-e", SSSP + ";" + COUNTER.format(n=4),
                "--plot", str(target))
    assert "2 CTE line(s)" in result.stderr
    assert target.read_bytes()[:4] == b"\x89PNG"
    assert invoke("-e", "SELECT 1", "--plot", str(target)).exit_code == 2  # no --overwrite


def test_interrupt_cancels_jobs_and_exits_130(session_spark, monkeypatch):
    cancelled = []
    monkeypatch.setattr(failures, "cancel_jobs", lambda spark: cancelled.append(spark))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(recsql, "run", interrupted)
    result = invoke("-e", "SELECT 1")
    assert result.exit_code == 130
    assert cancelled == [session_spark]
    assert "Interrupted" in result.stderr


# -- real processes (each starts a JVM) -------------------------------------------------------------

def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **extra}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    return env


def test_executable_no_java_stops_before_spark(tmp_path):
    proc = subprocess.run([*RECSQL, "-e", "SELECT 1"], capture_output=True, text=True,
                          check=False, env=_env(JAVA_HOME=str(tmp_path / "none")), timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith("[RECSQL_JAVA_NOT_FOUND] Spark needs Java 17+")
    assert "JAVA_GATEWAY_EXITED" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.timeout(180)
def test_an_interrupt_python_dropped_still_stops_the_statement(session_spark):
    """A KeyboardInterrupt raised where Python drops exceptions (a weakref callback, `__del__`)
    is lost; the cancel thread the handler started still fails the statement's next Spark job,
    and once the statement has unwound the next one runs untouched."""
    interrupts = app._Interrupts()
    interrupts.spark = session_spark  # not watch(): pytest's own SIGINT handler stays
    try:
        interrupts._handler(signal.SIGINT, None)
    except KeyboardInterrupt:
        pass  # lost where it was raised
    assert interrupts.pending
    with pytest.raises(Exception, match="(?i)cancel"):  # hours of work if nothing cancelled it
        session_spark.range(10**13).selectExpr("sum(id * 7 % 3)").collect()
    interrupts.handled()
    assert not interrupts.pending
    assert session_spark.range(5).selectExpr("sum(id)").collect()[0][0] == 10


def test_after_an_interrupt_the_shells_next_failure_reads_as_itself(session_spark, capsys):
    """The shell goes on after a Ctrl-C: its next statement's error is that error, not
    "Interrupted"."""
    interrupts = app._INTERRUPTS
    interrupts.spark = session_spark
    with pytest.raises(KeyboardInterrupt):
        interrupts._handler(signal.SIGINT, None)
    interrupts.handled()
    with pytest.raises(app._Failed), app._errors_reported(Reporter(silent=False, verbose=False), False):
        raise recsql.RecSQLError("the statement's own failure")
    assert "the statement's own failure" in capsys.readouterr().err


def test_executable_ctrl_c_exits_130_and_leaves_no_file(tmp_path):
    """A real process: rows of the first statement on a clean stdout, Spark's chatter on stderr;
    then SIGINT during the second: exit 130, Spark jobs cancelled, no --output file."""
    target = tmp_path / "out.csv"
    proc = subprocess.Popen([*RECSQL, "-v", "--master", "local[2]",
                             "-c", "spark.recsql.endgame.enabled=false",
                             "-c", "spark.recsql.maxIterations=1000000", "-e",
                             "SELECT 1, NULL; " + COUNTER.format(n=100000), "--output", str(target)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    seen = ""
    deadline = time.monotonic() + 240
    while "iteration 2:" not in seen and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert "iteration 2:" in seen, seen
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # say what it was doing: still iterating, or exiting?
        proc.kill()
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"still running 120 s after SIGINT; its stderr ends:\n{(seen + err)[-4000:]}")
    assert proc.returncode == 130, seen + err
    assert "Interrupted" in err and out == "1\tNULL\n"
    assert list(tmp_path.iterdir()) == []


def _read_until(fd: int, pattern: str, timeout: float = 180) -> str:
    text, deadline = "", time.monotonic() + timeout
    while not re.search(pattern, text) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                text += os.read(fd, 65536).decode(errors="replace")
            except OSError:
                break
    assert re.search(pattern, text), text
    return text


def test_interactive_shell_through_a_pty(tmp_path, edges):
    history = tmp_path / "history"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real command on a terminal
        os.chdir(tmp_path)
        os.execvpe(RECSQL[0], [*RECSQL, "--master", "local[2]", "--table", f"g={edges}"],
                   _env(RECSQL_HISTORY=str(history), COLUMNS="120", TERM="xterm"))
    try:
        def send(line: str) -> None:
            os.write(fd, (line + "\n").encode())

        _read_until(fd, r"recsql> ")
        send("SELECT 40 +")
        _read_until(fd, r"      > ")
        send("2 AS answer;")
        screen = _read_until(fd, r"answer[\s\S]*42[\s\S]*recsql> ")
        assert "│" in screen or "|" in screen  # a rich table on the terminal
        send("SELECT nope;")
        screen = _read_until(fd, r"recsql> ")
        assert "nope" in screen and "Traceback" not in screen
        send("SHOW TABLES;")
        _read_until(fd, r"g[\s\S]*recsql> ")
        send("EXPLAIN " + SSSP.replace("\n", " ") + ";")
        _read_until(fd, r"(?i)physical plan[\s\S]*recsql> ")
        send("exit")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(fd)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert "SELECT 40 +" in history.read_text()
