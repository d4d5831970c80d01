"""ALTER TABLE while a worker reads: a new column shows in every later envelope, earlier records
keep their shape, nothing is dropped."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import WorkerProcess, read_topic


def test_added_and_dropped_columns_while_reading(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str,
) -> None:
    table = f"{keyspace}.orders"
    emulator.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, item text) WITH cdc = {{'enabled': true}}")
    worker = workers(config_for([table]), "alter")
    topic = f"{bridge_name}.{table}"
    for i in range(10):
        emulator.execute(f"INSERT INTO {table} (id, item) VALUES ({i}, 'i{i}')")
    assert len(read_topic(stack.kafka_bootstrap, topic, expected=10, settle_s=0)) == 10
    emulator.execute(f"ALTER TABLE {table} ADD note text")
    for i in range(10, 20):
        emulator.execute(f"INSERT INTO {table} (id, item, note) VALUES ({i}, 'i{i}', 'n{i}')")
    # Dropping a column drops its log columns too (ScyllaDB does the same): records still unread
    # then lose its values. Let the worker read these first.
    assert len(read_topic(stack.kafka_bootstrap, topic, expected=20, settle_s=0)) == 20
    emulator.execute(f"ALTER TABLE {table} DROP item")
    for i in range(20, 30):
        emulator.execute(f"INSERT INTO {table} (id, note) VALUES ({i}, 'n{i}')")

    after = {json.loads(k)["id"]: json.loads(v)["after"] for k, v in
             read_topic(stack.kafka_bootstrap, topic, expected=30) if k and v}
    assert sorted(after) == list(range(30))
    for i in range(10):
        assert after[i] == {"id": i, "item": {"value": f"i{i}"}}, "a record before the change changed shape"
    for i in range(10, 20):
        assert after[i] == {"id": i, "item": {"value": f"i{i}"}, "note": {"value": f"n{i}"}}
    for i in range(20, 30):
        assert after[i]["note"] == {"value": f"n{i}"} and after[i].get("item") is None
    assert worker.stop() == 0
