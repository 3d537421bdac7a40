"""The embedded session recsql starts for a user: quiet on stderr."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_embedded_session_keeps_jvm_start_up_warnings_off_stderr(tmp_path):
    script = textwrap.dedent("""
        import recsql
        spark = recsql.session(master="local[1]")
        print(recsql.sql("SELECT 1 AS x").collect()[0].x)
        spark.stop()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    noise = [line for line in done.stderr.splitlines()
             if " WARN " in line or "Setting default log level" in line]
    assert noise == [], done.stderr
