"""The CQL renaming proxy against real Cassandra: `system_distributed` in the client's statements
reaches the emulator's 18-character keyspace and comes back under its ScyllaDB name, in rows,
prepared metadata and the driver's schema metadata; a v5 client is downgraded to v4."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.cluster import Cluster

from bridge_devstack.stack.cql_proxy import CqlRenamingProxy, replacement_name
from bridge_devstack.stack.layout import port_offset

PROXY_PORT = port_offset(26000) + 1042  # below the ephemeral ports (test_differential.py)
KEYSPACE = "sim_proxy_test_ks1"  # 18 characters, like system_distributed


@pytest.fixture(scope="module")
def proxied(stack: Any, cassandra_session: Any) -> Iterator[Any]:
    cassandra_session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE}"
        " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    cassandra_session.execute(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.probe (k int PRIMARY KEY, v text)")
    proxy = CqlRenamingProxy(PROXY_PORT, stack.cassandra_host, stack.cassandra_port, KEYSPACE)
    proxy.start()
    cluster = Cluster([stack.cassandra_host], port=PROXY_PORT)  # the driver asks for v5 first
    try:
        yield cluster, cluster.connect()
    finally:
        cluster.shutdown()
        proxy.stop()
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=60)


def test_statements_and_answers_are_renamed(proxied: Any, cassandra_session: Any) -> None:
    cluster, session = proxied
    assert cluster.protocol_version == 4
    session.execute("INSERT INTO system_distributed.probe (k, v) VALUES (1, 'system_distributed')")
    # Written to the real keyspace; a value holding the name is renamed too (a documented limit).
    row = cassandra_session.execute(f"SELECT v FROM {KEYSPACE}.probe WHERE k = 1").one()
    assert row.v == KEYSPACE
    prepared = session.prepare("SELECT k, v FROM system_distributed.probe WHERE k = ?")
    assert prepared.column_metadata[0].keyspace_name == "system_distributed"
    assert [tuple(r) for r in session.execute(prepared, (1,))] == [(1, "system_distributed")]
    session.execute("BEGIN BATCH INSERT INTO system_distributed.probe (k, v) VALUES (2, 'b') APPLY BATCH")
    assert cassandra_session.execute(f"SELECT v FROM {KEYSPACE}.probe WHERE k = 2").one().v == "b"
    cluster.refresh_schema_metadata()
    assert "probe" in cluster.metadata.keyspaces["system_distributed"].tables


def test_the_replacement_must_keep_the_length() -> None:
    with pytest.raises(ValueError, match="18 characters to stand for system_distributed, got 'sim_system_distributed'"):
        replacement_name("sim_system_distributed")
