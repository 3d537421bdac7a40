"""A recsql server on 127.0.0.1 over the suite's one SparkSession (module scope)."""

from __future__ import annotations

import pytest

import recsql
from tests.server.clients import register_edges


@pytest.fixture(scope="module")
def server(spark):
    with recsql.serve(spark=spark, port=0, init=register_edges, handshake_timeout=30) as running:
        yield running
