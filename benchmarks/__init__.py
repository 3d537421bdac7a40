"""recsql benchmark suites: `python -m benchmarks SUITE` (`--list` names them; see README.md)."""
