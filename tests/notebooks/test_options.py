"""The options line of `%%recsql` / `%recsql` (no kernel, no Spark)."""

from __future__ import annotations

import pytest

from recsql.notebook.options import OptionError, Options, parse


def test_options_then_the_sql_of_a_line_magic():
    options, sql = parse("-o trips -c spark.recsql.maxIterations=5 --conf a.b=c=d --stats --plot -n 3 "
                         "SELECT '-o' AS x -- a comment")
    assert options == Options(output="trips", conf={"spark.recsql.maxIterations": "5", "a.b": "c=d"},
                              stats=True, plot=True, limit=3)
    assert sql == "SELECT '-o' AS x -- a comment"


def test_jupysqls_store_spelling_and_a_comment_first():
    assert parse("result <<") == (Options(output="result"), "")
    assert parse("--explain result << SELECT 1") == (Options(output="result", explain=True), "SELECT 1")
    assert parse("-- just SQL") == (Options(), "-- just SQL")


@pytest.mark.parametrize("line, message", [
    ("--frobnicate", "unknown option --frobnicate; usage: %%recsql"),
    ("-o", "option -o needs a value"),
    ("-c nokey", "option -c takes KEY=VALUE, got 'nokey'"),
    ("-n many", "option -n takes a number of rows, got 'many'"),
    ("-o 1x", "option -o takes a Python name, got '1x'"),
])
def test_a_malformed_line_is_one_line(line, message):
    with pytest.raises(OptionError) as error:
        parse(line)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
