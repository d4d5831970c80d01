"""The benchmark's realistic backlog (devstack/bridge_devstack/sim/backlog.py) carried by one real `cdc-bridge run`
worker: every table's topic gets exactly the records the fill says the bridge must produce."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bridge_devstack.sim import Emulator
from bridge_devstack.sim.backlog import IMAGED, KINDS, realistic_fill
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import WorkerProcess, read_topic


def test_one_worker_produces_the_expected_envelopes_of_a_realistic_backlog(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    fill = realistic_fill(emulator, keyspace, 2000, partitions=200, chunk=500)
    assert fill.changes >= 2000 and set(fill.kinds) == set(KINDS), fill.as_dict()
    assert fill.log_rows > fill.changes, "the pre-image table got no pre-images"
    workers(config_for(fill.tables, experimental__preimages__enabled="true"), "w0")
    for table in fill.tables:
        expected = fill.envelopes_by_table[table.split(".", 1)[1]]
        messages = read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=expected, timeout_s=180)
        assert len(messages) == expected, f"{table}: {len(messages)} records, expected {expected}"
        envelopes = [json.loads(value) for _, value in messages if value is not None]
        ops = Counter(envelope["op"] for envelope in envelopes)
        assert set(ops) == {"c", "u", "d"}, ops
        assert len(messages) - len(envelopes) == ops["d"], "a delete without its tombstone (or the reverse)"
        if table.endswith(f".{IMAGED}"):
            assert any(e["before"] is not None and e["op"] == "u" for e in envelopes), "no pre-image reached `before`"
