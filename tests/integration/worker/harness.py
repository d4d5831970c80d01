"""Real `cdc-bridge run` processes for tests: config files, start, stop by pid, JSON log lines,
and a read_committed look at what they produced."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from bridge.settings import BridgeConfig
from bridge_devstack.stack.layout import Endpoints

CLI = [sys.executable, "-m", "bridge.cli"]


# The settings tests start workers with that differ from the shipped defaults (bridge/settings),
# each for a reason that is not speed of the suite at the cost of realism;
# tests/unit/test_harness_defaults.py keeps this list and the harness in step. Every other setting
# (slots.count 64, offset.storage.partitions 25, timeouts, windows) is what users run.
DEFAULT_EXCEPTIONS = {
    # The stack's Cassandra is no Scylla: the emulator writes the CDC log and its metadata tables
    # under these keyspaces (devstack/bridge_devstack/sim), where Scylla has system_distributed / system.
    "scylla.cdc.metadata.vnodes.keyspace": "the emulator's CDC metadata keyspace (no Scylla in the stack)",
    "scylla.cdc.metadata.tablets.keyspace": "the emulator's CDC metadata keyspace (no Scylla in the stack)",
    # Tests write rows, then start workers: with the default (0: start now) they would see nothing.
    "scylla.initial.lookback.ms": "tests write rows before the worker starts; the default starts at now",
    # The default 30 s window holds every change back 30 s: a test waiting for rows would wait 28 s
    # more each time, ~10 min over the suite (of 50 min CI). The window's meaning is tested with
    # its own value in test_run.py; what it bounds is Scylla's write latency, which the emulator has not.
    "scylla.confidence.window.size": "2 s instead of 30 s: each delivery would wait 28 s more",
    # Tests read the payload as plain JSON; the schema'd envelope is the converters' own tests'.
    "key.converter.schemas.enable": "tests read the plain JSON payload",
    "value.converter.schemas.enable": "tests read the plain JSON payload",
    # Many workers on one machine: the fixed default port would collide; tests of the probes and
    # metrics give a free port of their own.
    "metrics.port": "0 (off): many workers share the machine; probe tests pick a free port",
}
DEFAULT_SLOTS = int(BridgeConfig.model_fields["slots_count"].default)
CONFIDENCE_WINDOW_MS = 2000  # the tests' (DEFAULT_EXCEPTIONS)


def worker_properties(endpoints: Endpoints, name: str, tables: list[str], **extra: object) -> dict[str, str]:
    """A worker's settings on the stack: the shipped defaults but for DEFAULT_EXCEPTIONS; `extra`
    (dots as `__`) is what a test is about, and the test says why."""
    props = {
        "name": name,
        "topic.prefix": name,
        "scylla.cluster.ip.addresses": f"{endpoints.cassandra_host}:{endpoints.cassandra_port}",
        "scylla.table.names": ",".join(tables),
        "scylla.confidence.window.size": str(CONFIDENCE_WINDOW_MS),
        "scylla.initial.lookback.ms": "300000",
        "scylla.cdc.metadata.vnodes.keyspace": "sim_system_distributed",
        "scylla.cdc.metadata.tablets.keyspace": "sim_system",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "kafka.bootstrap.servers": endpoints.kafka_bootstrap,
        "metrics.port": "0",
    }
    props.update({key.replace("__", "."): str(value) for key, value in extra.items()})
    return props


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return path


@dataclass
class WorkerProcess:
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def events(self) -> list[dict[str, Any]]:
        found = []
        text = self.log_path.read_text(errors="replace")
        # The last line may be half-written while the process runs.
        for line in text[:text.rfind("\n") + 1].splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def stop(self, timeout_s: float = 40.0) -> int:
        """SIGTERM by pid; SIGKILL if it overruns. Returns the exit code."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
        return self.process.wait(10)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


def start_worker(config: Path, log_dir: Path, label: str, *extra_args: str,
                 launcher: list[str] | None = None) -> WorkerProcess:
    """`cdc-bridge run` (or `launcher` standing for `cdc-bridge`) logging into `log_dir`."""
    log_path = log_dir / f"{label}-{uuid.uuid4().hex[:6]}.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen([*(launcher or CLI), "run", "--config", str(config), *extra_args], stdout=out,
                                   stderr=subprocess.STDOUT)
    return WorkerProcess(process, log_path)


def wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def owned_slots(worker: WorkerProcess) -> set[int]:
    owned: set[int] = set()
    for event in worker.events():
        if event.get("event") == "slots assigned":
            owned |= set(event["slots"])
        elif event.get("event") in ("slots revoked", "slots lost"):
            owned -= set(event["slots"])
    return owned


Record = tuple[bytes | None, bytes | None]
RecordWithHeaders = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]


def read_topic_with_headers(bootstrap: str, topic: str, *, expected: int, timeout_s: float = 90.0,
                            settle_s: float = 3.0, client: dict[str, str] | None = None) -> list[RecordWithHeaders]:
    """Everything committed in `topic` as (key, value, headers): waits for `expected` records,
    then `settle_s` more so that duplicates beyond it would show. `client`: extra consumer
    settings (security).

    The partitions are assigned, not subscribed to: a check needs no consumer group, and under
    load a group's join once held `consume(timeout=0.5)` for the whole 600 s test timeout in CI."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, **(client or {})})
    messages: list[RecordWithHeaders] = []
    deadline = time.monotonic() + timeout_s
    settle_until: float | None = None
    try:
        partitions = _partitions_once_created(consumer, topic, deadline)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while time.monotonic() < deadline and (settle_until is None or time.monotonic() < settle_until):
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is None:
                    headers = [(name, bytes(value or b"")) for name, value in (message.headers() or [])]
                    messages.append((message.key(), message.value(), headers))
            if settle_until is None and len(messages) >= expected:
                settle_until = time.monotonic() + settle_s
    finally:
        consumer.close()
    return messages


def _partitions_once_created(consumer: Consumer, topic: str, deadline: float) -> list[int]:
    """The topic's partitions, waiting until the deadline for the worker to create it ([] if it
    never did: the caller then reads nothing and says how many records it expected)."""
    while True:
        found = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return sorted(found.partitions)
        if time.monotonic() >= deadline:
            return []
        time.sleep(0.25)


def read_topic(bootstrap: str, topic: str, *, expected: int, timeout_s: float = 90.0,
               settle_s: float = 3.0, client: dict[str, str] | None = None) -> list[Record]:
    """read_topic_with_headers without the headers: (key, value) per record."""
    return [(key, value) for key, value, _ in read_topic_with_headers(
        bootstrap, topic, expected=expected, timeout_s=timeout_s, settle_s=settle_s, client=client)]


def ids_of(messages: list[Record]) -> Iterator[int]:
    for key, value in messages:
        if value is not None and key is not None:
            yield int(json.loads(key)["id"])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of a worker's metrics/probe endpoint; (0, reason) when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return 0, str(error)


def metric_samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, by (name, sorted labels)."""
    status, text = http_get(port, "/metrics")
    assert status == 200, text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def inside_snapshot_or_past_it(worker: WorkerProcess) -> bool:
    """A few chunks in, or every snapshot it started is over (a late restart only streams)."""
    events = Counter(e.get("event") for e in worker.events())
    begun = events["snapshot started"] + events["snapshot resumed"]
    return events["snapshot chunk"] >= 3 or (events["group started"] > 0 and begun == events["snapshot finished"])
