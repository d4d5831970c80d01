"""Generation switches and tablet splits through real `cdc-bridge run` processes: successor groups
wait for predecessors read by other workers, a worker stopped across a switch resumes the old
generation even when `scylla.initial.lookback.ms` is shorter than the stop, and an old
generation's groups left without a position are read on a restart.

Each test keeps the CDC metadata in its own keyspace (a generation switch in the shared
`sim_system_distributed` would reach every other test running on the stack)."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from bridge.kafka.offsets import decode_key, encode_key
from bridge.scylla.groups import GroupId
from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import DEFAULT_SLOTS, WorkerProcess, owned_slots, read_topic, wait_for

SLOTS = DEFAULT_SLOTS
KEYS = 16


def table_in(emu: Emulator, keyspace: str, kind: str, cassandra_session: Any) -> tuple[str, str]:
    """(data keyspace, table); a tablets table lives in a tablets keyspace of its own."""
    data = keyspace
    if kind == "tablets":
        data = f"{keyspace}_tab"
        emu.execute(f"CREATE KEYSPACE {data} WITH replication = {{'class': 'SimpleStrategy', "
                    "'replication_factor': 1} AND tablets = {'enabled': true, 'initial': 4}")
    emu.execute(f"CREATE TABLE {data}.t (id int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    return data, "t"


def values_by_key(messages: list[tuple[bytes | None, bytes | None]]) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = defaultdict(list)
    for key, value in messages:
        if key is not None and value is not None:
            seen[json.loads(key)["id"]].append(json.loads(value)["after"]["v"]["value"])
    return seen


def differences(seen: dict[int, list[int]], written: dict[int, list[int]]) -> dict[int, dict[str, object]]:
    """Per key whose output is not exactly the written values in write order: what is wrong."""
    wrong: dict[int, dict[str, object]] = {}
    for key, values in written.items():
        got = seen.get(key, [])
        if got != values:
            wrong[key] = {"missing": sorted(set(values) - set(got)), "duplicates": len(got) - len(set(got)),
                          "in_order": got == sorted(got)}
    return wrong


class Writer(threading.Thread):
    """Updates `KEYS` keys round-robin with an increasing value; `switch` runs once, midway."""

    def __init__(self, emu: Emulator, table: str, seconds: float, switch: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.emu, self.table, self.seconds, self.switch = emu, table, seconds, switch
        self.written: dict[int, list[int]] = defaultdict(list)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started, switched, i = time.monotonic(), False, 0
            while time.monotonic() - started < self.seconds:
                if not switched and time.monotonic() - started > self.seconds / 3:
                    self.switch()
                    switched = True
                key = i % KEYS
                self.emu.execute(f"UPDATE {self.table} SET v = {i} WHERE id = {key}")
                self.written[key].append(i)
                i += 1
                time.sleep(0.01)
        except BaseException as error:
            self.error = error


@pytest.mark.parametrize("kind", ["vnodes", "tablets"])
def test_successors_wait_for_predecessors_read_by_other_workers(
    kind: str, private_emulator: Emulator, keyspace: str, cassandra_session: Any,
    config_for: Callable[..., Path], workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    data, table = table_in(private_emulator, keyspace, kind, cassandra_session)
    config = config_for([f"{data}.{table}"], scylla__cdc__metadata__vnodes__keyspace=keyspace,
                        scylla__cdc__metadata__tablets__keyspace=keyspace)
    try:
        pair = [workers(config, "a"), workers(config, "b")]
        wait_for(lambda: all(owned_slots(w) for w in pair)
                 and sum(len(owned_slots(w)) for w in pair) == SLOTS, 60, "two workers to share the slots")

        def switch() -> object:
            if kind == "vnodes":
                return private_emulator.bootstrap_node(delay_s=2)
            return private_emulator.tablets_split(data, table, delay_s=2)

        writer = Writer(private_emulator, f"{data}.{table}", 8.0, switch)
        writer.start()
        writer.join()
        assert writer.error is None
        total = sum(len(v) for v in writer.written.values())
        messages = read_topic(stack.kafka_bootstrap, f"{bridge_name}.{data}.{table}", expected=total, timeout_s=90)
        assert differences(values_by_key(messages), writer.written) == {}
        starts = [e["group"].split("/")[1] for w in pair for e in w.events() if e.get("event") == "group started"]
        assert len(set(starts)) >= 2, f"groups of one generation/stream set only: {set(starts)}"
        for worker in pair:
            assert worker.stop() == 0
    finally:
        if kind == "tablets":
            cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {data}", timeout=60)


def test_a_worker_stopped_across_a_switch_resumes_the_old_generation_despite_a_short_lookback(
    private_emulator: Emulator, keyspace: str, cassandra_session: Any,
    config_for: Callable[..., Path], workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    data, table = table_in(private_emulator, keyspace, "vnodes", cassandra_session)
    topic = f"{bridge_name}.{data}.{table}"
    config = config_for([f"{data}.{table}"], scylla__cdc__metadata__vnodes__keyspace=keyspace,
                        scylla__cdc__metadata__tablets__keyspace=keyspace)
    first = workers(config, "first")
    for i in range(10):
        private_emulator.execute(f"UPDATE {data}.{table} SET v = {i} WHERE id = {i}")
    read_topic(stack.kafka_bootstrap, topic, expected=10, settle_s=0)
    assert first.stop() == 0
    # While it is stopped: more changes in the old generation, a switch, changes in the new one.
    generation = private_emulator.bootstrap_node(delay_s=1)
    for i in range(10, 20):
        private_emulator.execute(f"UPDATE {data}.{table} SET v = {i} WHERE id = {i % 10}")
    while time.time() * 1000 < generation.timestamp_ms + 500:
        time.sleep(0.1)
    for i in range(20, 30):
        private_emulator.execute(f"UPDATE {data}.{table} SET v = {i} WHERE id = {i % 10}")
    time.sleep(4)  # now - lookback (3 s) is past the switch and past some new-generation changes
    again = workers(config, "again", "--set", "scylla.initial.lookback.ms=3000")
    messages = read_topic(stack.kafka_bootstrap, topic, expected=30)
    assert values_by_key(messages) == {k: [k, k + 10, k + 20] for k in range(10)}
    assert again.stop() == 0


@pytest.mark.parametrize("kind", ["vnodes", "tablets"])
def test_groups_ended_without_a_position_beside_finished_ones_are_read_after_a_restart(
    kind: str, private_emulator: Emulator, keyspace: str, cassandra_session: Any,
    config_for: Callable[..., Path], workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    """A worker SIGKILLed before its first commit leaves its groups without a position, while
    another worker finishes the other groups of the same generation (stream set): their saved
    ends are the switch. A CI run lost the first worker's changes so (its restart discovered from
    the switch on). Built exactly: after a full read across a switch, one ended group's offsets
    are deleted; the restart must read its changes again."""
    data, table = table_in(private_emulator, keyspace, kind, cassandra_session)
    topic = f"{bridge_name}.{data}.{table}"
    config = config_for([f"{data}.{table}"], scylla__cdc__metadata__vnodes__keyspace=keyspace,
                        scylla__cdc__metadata__tablets__keyspace=keyspace)
    try:
        first = workers(config, "first")
        for i in range(KEYS):
            private_emulator.execute(f"UPDATE {data}.{table} SET v = {i} WHERE id = {i}")
        switch = (private_emulator.bootstrap_node(delay_s=1) if kind == "vnodes"
                  else private_emulator.tablets_split(data, table, delay_s=1))
        while time.time() * 1000 < switch.timestamp_ms + 500:
            time.sleep(0.1)
        for i in range(KEYS):
            private_emulator.execute(f"UPDATE {data}.{table} SET v = {KEYS + i} WHERE id = {i}")
        read_topic(stack.kafka_bootstrap, topic, expected=2 * KEYS, settle_s=0)

        def logged(event: str) -> set[str]:
            return {e["group"] for e in first.events() if e.get("event") == event}
        before = {g for g in logged("group started") if int(g.split("/")[1]) < switch.timestamp_ms}
        wait_for(lambda: before <= logged("cdc group finished"), 60, "the groups before the switch to finish")
        assert first.stop() == 0

        ended = {group: partition for group, partition in offsets_records(stack, f"{bridge_name}-offsets").items()
                 if str(group) in before}
        log_rows = cassandra_session.execute(f'SELECT "cdc$stream_id", id, v FROM {data}.{table}_scylla_cdc_log')
        writes = [(str(StreamId(row[0]).index) if kind == "vnodes" else str(StreamId(row[0])), row[1])
                  for row in log_rows if row[2] < KEYS]
        forgotten = next(g for g in sorted(ended, key=str) if any(g.vnode_id == group for group, _ in writes))
        assert len(ended) > 1, "another ended group must keep its position"
        delete_offsets(stack, f"{bridge_name}-offsets", bridge_name, forgotten, ended[forgotten])
        again_keys = {key for group, key in writes if group == forgotten.vnode_id}

        again = workers(config, "again")
        messages = read_topic(stack.kafka_bootstrap, topic, expected=2 * KEYS + len(again_keys))
        assert values_by_key(messages) == {k: [k, KEYS + k, *([k] if k in again_keys else [])] for k in range(KEYS)}
        assert again.stop() == 0
    finally:
        if kind == "tablets":
            cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {data}", timeout=60)


def offsets_records(stack: Endpoints, offsets_topic: str) -> dict[GroupId, int]:
    """The partition of every live CDC offsets record of the topic, by group."""
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": "unused",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    partitions = consumer.list_topics(offsets_topic, timeout=10).topics[offsets_topic].partitions
    consumer.assign([TopicPartition(offsets_topic, p, 0) for p in partitions])
    live: dict[GroupId, int] = {}
    try:
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 2:
            for message in consumer.consume(500, timeout=0.5):
                quiet_since = time.monotonic()
                decoded = decode_key(message.key() or b"") if message.error() is None else None
                partition = message.partition()
                if decoded is None or partition is None:
                    continue
                if message.value() is None:
                    live.pop(decoded[1], None)
                else:
                    live[decoded[1]] = partition
    finally:
        consumer.close()
    return live


def delete_offsets(stack: Endpoints, offsets_topic: str, name: str, group: GroupId, partition: int) -> None:
    """A tombstone for the group's offsets key, in the partition that holds it."""
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    producer.produce(offsets_topic, key=encode_key(name, group), value=None, partition=partition)
    assert producer.flush(10) == 0
