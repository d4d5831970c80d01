"""Saved positions older than the log's TTL (its changes may have expired unread): with
`scylla.offsets.expired.mode=fail` (the default) the group stops visibly instead of streaming
over the gap; with `resume` it streams on and the gap is logged and counted, as before."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bridge_devstack.sim import Emulator
from tests.integration.worker.harness import WorkerProcess, free_port, http_get, metric_samples, wait_for

TTL_S = 4


@pytest.mark.parametrize("mode", ["fail", "resume"])
def test_offsets_older_than_the_log_ttl(
    mode: str, emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess],
) -> None:
    table = f"{keyspace}.orders"
    emulator.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, item text)"
                     f" WITH cdc = {{'enabled': true, 'ttl': {TTL_S}}}")
    port = free_port()
    config = config_for([table], heartbeat__interval__ms=200, metrics__port=port, scylla__offsets__expired__mode=mode)
    first = workers(config, f"{mode}-1")
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "the first worker to be ready")
    emulator.execute(f"INSERT INTO {table} (id, item) VALUES (1, 'x')")
    wait_for(lambda: any(e.get("event") == "group started" for e in first.events()), 30, "the group to run")
    time.sleep(3)  # positions committed by the heartbeat
    assert first.stop() == 0
    time.sleep(TTL_S + 3)  # the saved positions fall out of the log's TTL

    second = workers(config, f"{mode}-2")
    gap = ("cdc_bridge_possible_gaps_total", (("keyspace", keyspace), ("table", "orders")))
    wait_for(lambda: http_get(port, "/metrics")[0] == 200 and metric_samples(port).get(gap, 0) >= 1, 90,
             "the gap to be counted")
    if mode == "fail":
        wait_for(lambda: http_get(port, "/readyz")[0] == 503, 30, "/readyz to report the group")
        assert "older than the log's TTL" in http_get(port, "/readyz")[1]
    else:
        time.sleep(3)
        assert http_get(port, "/readyz")[0] == 200
        assert not any(e.get("event") == "group failed" for e in second.events())
