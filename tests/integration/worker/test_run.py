"""`cdc-bridge run` end to end: real worker processes, Cassandra with the emulator, real Kafka."""

from __future__ import annotations

import collections
import subprocess
from collections.abc import Callable
from pathlib import Path

from bridge.sim import Emulator
from bridge.stack.layout import Endpoints
from tests.integration.worker.harness import (
    CLI,
    DEFAULT_SLOTS,
    WorkerProcess,
    ids_of,
    owned_slots,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)

SLOTS = DEFAULT_SLOTS


def make_table(emu: Emulator, keyspace: str, table: str = "orders") -> str:
    emu.execute(f"CREATE TABLE {keyspace}.{table} (id int PRIMARY KEY, customer text, item text)"
                " WITH cdc = {'enabled': true}")
    return f"{keyspace}.{table}"


def insert(emu: Emulator, table: str, ids: range) -> None:
    for i in ids:
        emu.execute(f"INSERT INTO {table} (id, customer, item) VALUES ({i}, 'c{i}', 'apple')")


def settled(group: list[WorkerProcess]) -> bool:
    """Every worker owns slots, and together they own each slot once."""
    owned = [owned_slots(w) for w in group]
    return all(owned) and sum(len(s) for s in owned) == SLOTS and set().union(*owned) == set(range(SLOTS))


def assert_each_once(messages: list[tuple[bytes | None, bytes | None]], expected: range) -> None:
    counts = collections.Counter(ids_of(messages))
    assert {i for i, n in counts.items() if n > 1} == set(), "duplicates"
    assert set(counts) == set(expected), f"missing {sorted(set(expected) - set(counts))[:10]}"


def test_workers_share_slots_and_only_moved_slots_change_hands(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    """Three workers own disjoint slots covering all; a fourth takes slots only from the others'
    surplus; one stopping hands only its own slots on; every change arrives once."""
    table = make_table(emulator, keyspace)
    config = config_for([table])
    first = [workers(config, f"w{i}") for i in range(3)]
    insert(emulator, table, range(0, 60))
    wait_for(lambda: settled(first), 60, "three workers to own every slot")
    owned = [owned_slots(w) for w in first]
    assert all(owned) and set().union(*owned) == set(range(SLOTS))
    assert sum(len(s) for s in owned) == SLOTS, f"overlap: {owned}"

    fourth = workers(config, "w3")
    insert(emulator, table, range(60, 120))
    wait_for(lambda: len(owned_slots(fourth)) >= 2 and settled([*first, fourth]), 60,
             "the fourth worker to get slots")
    after_join = [owned_slots(w) for w in first]
    for before, after in zip(owned, after_join, strict=True):
        assert after <= before, "a worker that was there gained slots when a fourth joined"
    assert owned_slots(fourth) == set().union(*owned) - set().union(*after_join)

    assert first[1].stop() == 0
    insert(emulator, table, range(120, 180))
    remaining = [first[0], first[2], fourth]
    wait_for(lambda: settled(remaining), 60, "the stopped worker's slots to move")
    for worker, before in zip(remaining, [after_join[0], after_join[2], owned_slots(fourth)], strict=True):
        assert owned_slots(worker) >= before, "a remaining worker lost slots it kept"

    messages = read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=180)
    assert_each_once(messages, range(180))
    for worker in remaining:
        assert worker.stop() == 0


def test_clean_restart_reads_nothing_twice(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    table = make_table(emulator, keyspace)
    config = config_for([table])
    insert(emulator, table, range(30))
    worker = workers(config, "first")
    topic = f"{bridge_name}.{table}"
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=30, settle_s=0), range(30))
    assert worker.stop() == 0
    again = workers(config, "again")
    insert(emulator, table, range(30, 40))
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=40), range(40))
    assert again.stop() == 0
    produced = [e for e in again.events() if e.get("event") == "worker stopped"]
    assert produced and produced[0]["records"] == 10


def run_cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout_s, check=False)


def test_bad_settings_stop_startup_with_one_line(tmp_path: Path, stack: Endpoints, keyspace: str) -> None:
    base = worker_properties(stack, "bad", [f"{keyspace}.nope"])
    cases = {
        "unknown": ({"scylla.tabel.names": "x.y"}, "scylla.tabel.names: unknown setting"),
        "no prefix": ({"topic.prefix": None}, "topic.prefix: required, missing"),
        "window": ({"scylla.confidence.window.size": "2s"}, "scylla.confidence.window.size: input should be"),
        # A Kafka that does not answer is waited for up to startup.timeout.ms (5 min by default,
        # test_startup_topics.py), then the same one line: this case is about that line, so a short bound.
        "kafka": ({"kafka.bootstrap.servers": "127.0.0.1:1", "startup.timeout.ms": "3000"},
                  "kafka.bootstrap.servers: 127.0.0.1:1"),
        "table": ({}, f"scylla.table.names: table {keyspace}.nope does not exist"),
    }
    for label, (changes, expected) in cases.items():
        props = {**base, **{k: v for k, v in changes.items() if v is not None}}
        for key in [k for k, v in changes.items() if v is None]:
            props.pop(key)
        config = write_properties(tmp_path / f"{label.replace(' ', '_')}.properties", props)
        result = run_cli("run", "--config", str(config))
        errors = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2, (label, result.stdout[-2000:], result.stderr[-2000:])
        assert len(errors) == 1 and errors[0].startswith(f"error: {expected}"), (label, errors)
