"""The Kafka side checked before and while a worker runs: an offsets topic that would expire
positions, a slots topic whose partitions disagree with `slots.count` (beforehand, or changed under
running workers), unreadable offsets records, and the ops commands' errors, each as one line."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewPartitions, NewTopic

from bridge.kafka.slots import slot_of
from bridge.scylla.groups import GroupId
from bridge.sim import Emulator
from bridge.stack.layout import Endpoints
from tests.integration.worker.harness import (
    CLI,
    WorkerProcess,
    free_port,
    metric_samples,
    owned_slots,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)
from tests.integration.worker.test_run import assert_each_once, insert, make_table

SLOTS = 12


def run_cli(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout_s, check=False)


def one_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, (result.stdout[-2000:], result.stderr[-3000:])
    return lines[0]


@pytest.fixture
def own_topics(kafka_admin: Any, bridge_name: str) -> Iterator[Callable[..., str]]:
    """Creates topics; every topic of the test's name (offsets, slots, data) is deleted afterwards."""

    def create(name: str, partitions: int, config: dict[str, str] | None = None) -> str:
        futures = kafka_admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                                      config=config or {})])
        futures[name].result(timeout=30)
        return name

    yield create
    mine = [t for t in kafka_admin.list_topics(timeout=30).topics if t.startswith(bridge_name)]
    if mine:
        for future in kafka_admin.delete_topics(mine).values():
            future.result(timeout=30)


@pytest.mark.parametrize("policy", ["delete", "compact,delete"])
def test_an_offsets_topic_that_is_not_compacted_is_refused_at_start(
    policy: str, tmp_path: Path, stack: Endpoints, bridge_name: str, own_topics: Callable[..., str],
) -> None:
    offsets = own_topics(f"{bridge_name}-offsets", 3, {"cleanup.policy": policy})
    config = write_properties(tmp_path / "w.properties", worker_properties(stack, bridge_name, ["ks_none.t"]))
    result = run_cli("run", "--config", str(config))
    line = one_error(result)
    assert result.returncode == 2
    assert line.startswith(f"error: offset.storage.topic: topic {offsets} has cleanup.policy={policy}"), line
    assert (f"kafka-configs.sh --bootstrap-server {stack.kafka_bootstrap} --alter --entity-type topics "
            f"--entity-name {offsets} --add-config cleanup.policy=compact") in line


@pytest.mark.parametrize("partitions", [7, 16])
def test_a_slots_topic_whose_partitions_differ_from_slots_count_is_refused_at_start(
    partitions: int, tmp_path: Path, stack: Endpoints, bridge_name: str, own_topics: Callable[..., str],
) -> None:
    """Measured on main: a 7-partition slots topic with slots.count 64 delivered 23 of 300 rows and
    said nothing. Now the worker does not start."""
    slots = own_topics(f"{bridge_name}-slots", partitions)
    config = write_properties(tmp_path / "w.properties",
                              worker_properties(stack, bridge_name, ["ks_none.t"], slots__count=SLOTS))
    result = run_cli("run", "--config", str(config))
    line = one_error(result)
    assert result.returncode == 2
    assert line.startswith(f"error: slots.count: {SLOTS}, but the slots topic {slots} (slots.topic) has "
                           f"{partitions} partitions"), line
    fix = "--alter --topic" if partitions < SLOTS else "--delete --topic"
    assert f"set slots.count={partitions}, or stop every worker" in line and fix in line, line


def test_a_running_worker_stops_when_the_slots_topic_gains_partitions(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str, kafka_admin: Any, own_topics: Callable[..., str],
) -> None:
    """Running on with the old map beside workers started with the new count would read groups
    twice or never: the worker aborts what is open and exits 1, and its restart is refused."""
    table = make_table(emulator, keyspace)
    config = config_for([table], slots__count=SLOTS)
    insert(emulator, table, range(20))
    worker = workers(config, "w")
    topic = f"{bridge_name}.{table}"
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=20, settle_s=0), range(20))
    wait_for(lambda: len(owned_slots(worker)) == SLOTS, 30, "the worker to own every slot")

    futures = kafka_admin.create_partitions([NewPartitions(f"{bridge_name}-slots", SLOTS + 4)])
    for future in futures.values():
        future.result(timeout=30)
    assert worker.process.wait(30) == 1
    events = worker.events()
    changed = [e for e in events if e.get("event") == "slots topic changed under a running worker; stopping"]
    assert changed and changed[0]["partitions"] == SLOTS + 4 and changed[0]["slots_count"] == SLOTS, events[-5:]
    failed = [e for e in events if e.get("event") == "worker failed"]
    assert failed and failed[0]["error"].startswith(f"slots.count: {SLOTS}, but the slots topic"), failed

    again = run_cli("run", "--config", str(config))
    assert again.returncode == 2 and one_error(again).startswith(f"error: slots.count: {SLOTS}, but")
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=20), range(20))


def test_unreadable_offsets_records_are_reported_and_ours_refuse_start(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str, own_topics: Callable[..., str],
) -> None:
    """A running worker counts each unreadable record (metric, log line with partition and offset);
    one of its groups' values unreadable at start: start-up stops instead of starting that group from
    the default start; `offsets show` names it, `offsets reset --corrupt` removes it."""
    table = make_table(emulator, keyspace)
    port = free_port()
    config = config_for([table], slots__count=SLOTS, metrics__port=port)
    insert(emulator, table, range(10))
    worker = workers(config, "first")
    topic = f"{bridge_name}.{table}"
    read_topic(stack.kafka_bootstrap, topic, expected=10, settle_s=0)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--config", str(config))

    groups = [line.split(" ", 1)[0] for line in cli("offsets", "show").stdout.splitlines()]
    assert groups, "no committed positions"
    victim = groups[0].encode()
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})
    producer.produce(f"{bridge_name}-offsets", key=b"\x00not a key", value=b"{}")
    producer.produce(f"{bridge_name}-offsets", key=victim, value=b"{broken")
    assert producer.flush(30) == 0

    def corrupt_count(kind: str) -> float:
        return metric_samples(port).get(("cdc_bridge_offsets_records_corrupt_total", (("kind", kind),)), 0.0)

    wait_for(lambda: corrupt_count("key") == 1 and corrupt_count("value") == 1, 30, "the corrupt records counted")
    reports = [e for e in worker.events() if e.get("event", "").startswith("unreadable offsets record")]
    assert {(e["level"], e["reason"].split(":")[0]) for e in reports} == {
        ("warning", "key is not JSON"), ("error", "offsets value is not JSON")}, reports
    assert worker.stop() == 0  # (its own commits went on meanwhile: it knows its positions)

    # Stopped: its last commit of that group replaced the bad value, unless the group was idle.
    # Write it again so that the bad value is the group's latest record.
    producer.produce(f"{bridge_name}-offsets", key=victim, value=b"{broken")
    assert producer.flush(30) == 0
    refused = run_cli("run", "--config", str(config))
    line = one_error(refused)
    assert refused.returncode == 2 and line.startswith("error: offset.storage.topic: unreadable offsets record of "
                                                       f"group {keyspace}.orders/"), line
    assert f"at {bridge_name}-offsets/" in line and "offsets reset --corrupt" in line

    shown = cli("offsets", "show")
    assert shown.returncode == 1 and "unreadable offsets record of group" in shown.stderr
    assert victim.decode() not in shown.stdout
    reset = cli("offsets", "reset", "--corrupt")
    assert reset.returncode == 0 and "reset 1 unreadable records" in reset.stdout, (reset.stdout, reset.stderr)
    assert cli("offsets", "show").returncode == 0

    insert(emulator, table, range(10, 15))
    again = workers(config, "again")
    ids = read_topic(stack.kafka_bootstrap, topic, expected=15, settle_s=2)
    assert {10, 11, 12, 13, 14} <= {int(json.loads(k)["id"]) for k, v in ids if k and v}
    assert again.stop() == 0


def test_ops_commands_fail_in_one_line(
    tmp_path: Path, stack: Endpoints, bridge_name: str, keyspace: str,
) -> None:
    base = worker_properties(stack, bridge_name, [f"{keyspace}.orders"])
    down = write_properties(tmp_path / "down.properties", {**base, "kafka.bootstrap.servers": "127.0.0.1:1"})
    for command in (["status", "--sample-s", "0"], ["offsets", "show"]):
        result = run_cli(*command, "--config", str(down))
        assert result.returncode == 1, (command, result.stderr[-2000:])
        assert one_error(result).startswith("error: kafka.bootstrap.servers: 127.0.0.1:1: "), command
        assert result.stdout == "", command  # librdkafka's reconnect lines are not the answer
    up = write_properties(tmp_path / "up.properties", base)
    for table, expected in (("not-a-table", "--table: 'not-a-table' is not keyspace.table"),
                            (f"{keyspace}.other", f"--table: {keyspace}.other is not in scylla.table.names")):
        result = run_cli("offsets", "reset", "--table", table, "--config", str(up))
        assert result.returncode == 2 and one_error(result).startswith(f"error: {expected}"), result



def test_a_slot_taken_over_fails_the_group_whose_latest_offsets_record_is_unreadable(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str, own_topics: Callable[..., str],
) -> None:
    """Worker B, already running, takes over A's slots after A is SIGKILLed; one of A's groups has
    an unreadable value as its latest offsets record. B fails that group loudly instead of starting
    it from what it guesses (the last readable position, or the default start) and starts the rest."""
    table = make_table(emulator, keyspace)
    # No heartbeat commits: A must not replace the bad record before it dies.
    config = config_for([table], slots__count=SLOTS, heartbeat__interval__ms=600_000)
    insert(emulator, table, range(40))
    first = workers(config, "a")
    second = workers(config, "b")
    wait_for(lambda: len(owned_slots(first)) + len(owned_slots(second)) == SLOTS and owned_slots(first)
             and owned_slots(second), 60, "two workers to share the slots")
    read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=40, settle_s=0)

    shown = run_cli("offsets", "show", "--config", str(config)).stdout.splitlines()
    keys = [line.split(" ", 1)[0] for line in shown]
    groups = {key: GroupId.from_offsets_key(json.loads(key)[1]) for key in keys}
    # Groups of the current generation only: one of a generation that ended before the table
    # existed (the emulator's shared metadata may hold several) is finished, and never started.
    newest = max(group.generation_start_ms for group in groups.values())
    of_first = [key for key, group in groups.items()
                if slot_of(bridge_name, group, SLOTS) in owned_slots(first) and group.generation_start_ms == newest]
    assert of_first, "the first worker committed no group"
    victim = of_first[0]
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})
    producer.produce(f"{bridge_name}-offsets", key=victim.encode(), value=b"{broken")
    assert producer.flush(30) == 0
    seen = len(second.events())  # (the second worker may have run the group before the first joined)
    first.kill()

    def failed() -> list[dict[str, Any]]:
        return [e for e in second.events()[seen:] if e.get("event") == "group failed"]

    wait_for(lambda: len(owned_slots(second)) == SLOTS and failed(), 60, "the takeover and the failed group")
    event = failed()[0]  # (retried later, it fails again: each retry is another such line)
    assert event["group"] == str(groups[victim])
    assert event["error"].startswith(f"unreadable offsets record of group {groups[victim]} at {bridge_name}-offsets/")
    started = {e["group"] for e in second.events()[seen:] if e.get("event") == "group started"}
    assert str(groups[victim]) not in started
    assert {str(groups[k]) for k in of_first[1:]} <= started, "the other groups of the slots moved on"
    assert second.stop() == 0
