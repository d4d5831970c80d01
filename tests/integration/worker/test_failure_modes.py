"""A table without CDC is refused at start; a change the bridge cannot translate, by
`event.processing.failure.handling.mode`: `fail` (the default) stops its group visibly, `warn`
passes it to the dead-letter topic with the reason and goes on. The untranslatable changes are
real log rows: the log table carries a column its base table lacks (added to the log table
behind the emulator's back), which no schema reload explains."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import (
    CLI,
    WorkerProcess,
    free_port,
    http_get,
    metric_samples,
    read_topic,
    wait_for,
)


def _poisoned_table(emulator: Emulator, keyspace: str) -> str:
    emulator.execute(f"CREATE TABLE {keyspace}.orders (id int PRIMARY KEY, item text) WITH cdc = {{'enabled': true}}")
    emulator.session.execute(f"ALTER TABLE {keyspace}.orders_scylla_cdc_log ADD junk text")
    return f"{keyspace}.orders"


def test_warn_passes_each_change_to_the_dead_letter_topic_and_stays_ready(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str,
) -> None:
    table = _poisoned_table(emulator, keyspace)
    port, dlq = free_port(), f"{bridge_name}-dlq"
    config = config_for([table], event__processing__failure__handling__mode="warn",
                        errors__deadletterqueue__topic__name=dlq, metrics__port=port)
    worker = workers(config, "warn")
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "the worker to be ready")
    for i in range(4):
        emulator.execute(f"INSERT INTO {table} (id, item) VALUES ({i}, 'x')")
    letters = read_topic(stack.kafka_bootstrap, dlq, expected=4)
    assert len(letters) == 4
    values = [json.loads(value or b"{}") for _, value in letters]
    assert {v["table"] for v in values} == {"orders"} and all("junk" in v["reason"] for v in values)
    assert sorted(v["rows"][0]["cells"]["id"] for v in values) == [0, 1, 2, 3]
    assert all(v["position"]["change_id_time"] == v["cdc_time"] for v in values)
    assert http_get(port, "/readyz")[0] == 200
    ks = keyspace
    assert metric_samples(port)[("cdc_bridge_changes_failed_total", (("action", "passed"), ("keyspace", ks),
                                                                      ("table", "orders")))] == 4
    assert any(e.get("event") == "change passed: it cannot be carried" for e in worker.events())


def test_fail_stops_the_group_visibly(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
) -> None:
    table = _poisoned_table(emulator, keyspace)
    port = free_port()
    workers(config_for([table], metrics__port=port), "fail")
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "the worker to be ready")
    emulator.execute(f"INSERT INTO {table} (id, item) VALUES (1, 'x')")
    wait_for(lambda: http_get(port, "/readyz")[0] == 503, 60, "/readyz to report the failed group")
    reason = http_get(port, "/readyz")[1]
    assert table in reason and "junk" in reason, reason


def test_a_table_without_cdc_is_refused_at_start_in_one_line(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
) -> None:
    """On ffd4452 the worker waited 60 s for a log table that never comes."""
    emulator.execute(f"CREATE TABLE {keyspace}.plain (id int PRIMARY KEY, item text)")
    config = config_for([f"{keyspace}.plain"])
    started = time.monotonic()
    result = subprocess.run([*CLI, "run", "--config", str(config)], capture_output=True, text=True, timeout=90,
                            check=False)
    assert time.monotonic() - started < 30
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors == [f"error: scylla.table.names: table {keyspace}.plain has no CDC log "
                      f"({keyspace}.plain_scylla_cdc_log): turn CDC on with ALTER TABLE {keyspace}.plain WITH "
                      "cdc = {'enabled': true}"], result.stderr
