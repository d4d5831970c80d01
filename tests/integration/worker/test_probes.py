"""A worker's metrics port: `/metrics` counts what it really did, `/healthz` and `/readyz` say
whether its loop turns and whether it serves its slots. (Readiness while Kafka is down is checked
in test_server_restarts, which owns a private Kafka it can stop.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bridge.sim import Emulator
from bridge.stack.layout import Endpoints
from tests.integration.worker.harness import (
    DEFAULT_SLOTS,
    WorkerProcess,
    free_port,
    http_get,
    metric_samples,
    read_topic,
    wait_for,
)

SLOTS = DEFAULT_SLOTS


def test_metrics_and_probes_tell_what_the_worker_did(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    emulator.execute(f"CREATE TABLE {keyspace}.t (pk int, ck int, v int, PRIMARY KEY (pk, ck))"
                     " WITH cdc = {'enabled': true}")
    port = free_port()
    worker = workers(config_for([f"{keyspace}.t"], metrics__port=port), "w")
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 60, "the worker to be ready")
    assert http_get(port, "/healthz")[0] == 200
    for i in range(20):
        emulator.execute(f"INSERT INTO {keyspace}.t (pk, ck, v) VALUES ({i % 4}, {i}, {i})")
    for i in range(5):
        emulator.execute(f"UPDATE {keyspace}.t SET v = -1 WHERE pk = {i % 4} AND ck = {i}")
    emulator.execute(f"DELETE FROM {keyspace}.t WHERE pk = 1 AND ck = 1")
    emulator.execute(f"DELETE FROM {keyspace}.t WHERE pk = 2 AND ck > 5")  # a range delete: dropped
    # 20 creates, 5 updates, 1 delete and its tombstone
    read_topic(stack.kafka_bootstrap, f"{bridge_name}.{keyspace}.t", expected=27, settle_s=1)

    table = (("keyspace", keyspace), ("table", "t"))

    def labels(*more: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((*table, *more)))

    def produced(op: str) -> float:
        return metric_samples(port).get(("cdc_bridge_records_produced_total", labels(("op", op))), -1)

    wait_for(lambda: produced("tombstone") == 1, 30, "the metrics to catch up with the topic")
    samples = metric_samples(port)
    assert [produced(op) for op in ("c", "u", "d")] == [20, 5, 1]
    assert samples[("cdc_bridge_deletes_dropped_total", labels(("kind", "range_delete")))] == 1
    # rows: one per insert/update/delete; a range delete is two rows (start and end bound)
    assert samples[("cdc_bridge_rows_read_total", table)] == 28
    assert samples[("cdc_bridge_transactions_committed_total", ())] >= 1
    assert samples[("cdc_bridge_owned_slots", ())] == SLOTS
    assert samples[("cdc_bridge_ready", ())] == 1
    assert samples[("cdc_bridge_window_read_seconds_count", table)] > 0
    lags = [v for (name, labels), v in samples.items() if name == "cdc_bridge_group_lag_seconds"]
    assert lags and all(0 <= lag < 60 for lag in lags), lags

    assert worker.stop() == 0
    assert http_get(port, "/healthz")[0] == 0, "the port closes with the worker"
    about_groups = [e for e in worker.events() if "group" in e]
    assert about_groups, "no log line about a group"
    assert [e for e in about_groups if not (e.get("keyspace") == keyspace and e.get("table") == "t")] == []
