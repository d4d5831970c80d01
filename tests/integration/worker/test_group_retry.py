"""A failed group is retried from its last commit, /readyz says which group failed and why while
it is, and nothing is lost or doubled: the schema registry unreachable across an `ALTER TABLE ...
ADD` with Avro (on ffd4452 the changes after the ALTER never arrived and /readyz said 200)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bridge.sim import Emulator
from bridge.stack.layout import Endpoints
from tests.integration.worker.harness import WorkerProcess, free_port, http_get, read_topic, wait_for
from tests.integration.worker.tcp_proxy import TcpProxy


@pytest.fixture
def registry_proxy(stack: Endpoints) -> Iterator[TcpProxy]:
    parts = urlsplit(stack.schema_registry_url)
    proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 80))
    yield proxy
    proxy.down()


def test_registry_outage_across_an_alter_fails_the_group_visibly_then_it_recovers_exactly_once(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str, registry_proxy: TcpProxy,
) -> None:
    table = f"{keyspace}.orders"
    emulator.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, item text) WITH cdc = {{'enabled': true}}")
    parts = urlsplit(stack.schema_registry_url)
    url = f"http://127.0.0.1:{registry_proxy.port}{parts.path}"
    port = free_port()
    config = config_for([table], key__converter="avro", value__converter="avro",
                        key__converter__schema__registry__url=url, value__converter__schema__registry__url=url,
                        errors__retry__delay__max__ms=4000, metrics__port=port)
    workers(config, "retry")
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "the worker to be ready")
    for i in range(3):
        emulator.execute(f"INSERT INTO {table} (id, item) VALUES ({i}, 'before')")
    topic = f"{bridge_name}.{table}"
    assert len(read_topic(stack.kafka_bootstrap, topic, expected=3)) == 3

    registry_proxy.down()
    emulator.execute(f"ALTER TABLE {table} ADD extra text")
    for i in range(3, 53):
        emulator.execute(f"INSERT INTO {table} (id, item, extra) VALUES ({i}, 'after', 'x{i}')")
    wait_for(lambda: http_get(port, "/readyz")[0] == 503, 60, "/readyz to report the failed group")
    reason = http_get(port, "/readyz")[1]
    assert "failed group" in reason and table in reason, reason

    registry_proxy.up()
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "the group to recover")
    messages = read_topic(stack.kafka_bootstrap, topic, expected=53, timeout_s=60)
    assert len(messages) == 53
    assert len({key for key, _ in messages}) == 53  # every change once: 53 distinct keys, nothing doubled
