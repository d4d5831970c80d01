"""The ScyllaDB blog's orders example through one real worker (`cdc-bridge demo`).

The emulator creates `ks.orders` with CDC on the local stack; one `cdc-bridge run` process reads
it; Tim orders an apple, Alice orders blueberries, Tim's order becomes a pineapple and is then
deleted; a `read_committed` consumer prints each envelope as it arrives (four events and the
delete's tombstone, a little after the 2 s confidence window).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.stack.layout import Endpoints

KEYSPACE = "ks"
Messages = list[tuple[bytes | None, bytes | None]]  # (key, value); a None value is a tombstone
WRITES = (
    "INSERT INTO ks.orders (customer, order_id, product) VALUES ('Tim', 1, 'apple')",
    "INSERT INTO ks.orders (customer, order_id, product) VALUES ('Alice', 2, 'blueberries')",
    "UPDATE ks.orders SET product = 'pineapple' WHERE customer = 'Tim' AND order_id = 1",
    "DELETE FROM ks.orders WHERE customer = 'Tim' AND order_id = 1",
)
EXPECTED = 5  # c, c, u, d and the tombstone


def worker_properties(endpoints: Endpoints, name: str) -> str:
    sim = SimSettings()
    return "\n".join([
        f"name={name}",
        "topic.prefix=demo",
        f"scylla.cluster.ip.addresses={endpoints.cassandra_host}:{endpoints.cassandra_port}",
        "scylla.table.names=ks.orders",
        "scylla.confidence.window.size=2000",
        "scylla.initial.lookback.ms=60000",
        f"scylla.cdc.metadata.vnodes.keyspace={sim.vnodes_keyspace}",
        f"scylla.cdc.metadata.tablets.keyspace={sim.tablets_keyspace}",
        "experimental.preimages.enabled=true",
        "key.converter.schemas.enable=false",
        "value.converter.schemas.enable=false",
        f"kafka.bootstrap.servers={endpoints.kafka_bootstrap}",
        "slots.count=4",
        "offset.storage.partitions=1",
        "metrics.port=0",
        "",
    ])


def create_table(emu: Emulator) -> None:
    emu.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}")
    emu.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    emu.execute("CREATE TABLE ks.orders (customer text, order_id int, product text, PRIMARY KEY (customer, order_id))"
                " WITH cdc = {'enabled': true, 'preimage': true}")


def _consumer_at_end(bootstrap: str, topic: str) -> Any:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=15).topics:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(15)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-{os.getpid()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=15).topics[topic].partitions
    ends = [TopicPartition(topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1])
            for p in partitions]
    consumer.assign(ends)  # only what this run writes
    return consumer


def run(endpoints: Endpoints, say: Callable[[str], None] = print, timeout_s: float = 60.0,
        spark: bool = False) -> Messages:
    topic = "demo.ks.orders"
    consumer = _consumer_at_end(endpoints.kafka_bootstrap, topic)
    if spark:
        from bridge_devstack.spark_demo import end_offsets

        start = end_offsets(endpoints.kafka_bootstrap, topic)
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        create_table(emu)
        say("created ks.orders with CDC (preimage) through the emulator")
        with tempfile.TemporaryDirectory() as folder:
            config = Path(folder) / "worker.properties"
            config.write_text(worker_properties(endpoints, f"demo-{time.strftime('%Y%m%d%H%M%S')}"))
            log = Path(folder) / "worker.log"
            with log.open("wb") as out:
                worker = subprocess.Popen([sys.executable, "-m", "bridge.cli", "run", "--config", str(config)],
                                          stdout=out, stderr=subprocess.STDOUT)
            try:
                say(f"started one worker: cdc-bridge run --config worker.properties (pid {worker.pid})")
                messages = _write_and_watch(emu, consumer, say, timeout_s)
            finally:
                _stop(worker, say)
                consumer.close()
            if len(messages) < EXPECTED:
                say(f"only {len(messages)} of {EXPECTED} records arrived; the worker's log:\n{log.read_text()[-3000:]}")
                raise RuntimeError(f"only {len(messages)} of {EXPECTED} records arrived in {timeout_s:.0f} s")
    if spark:
        from bridge_devstack.spark_demo import show

        show(endpoints.kafka_bootstrap, topic, start, say)
    return messages


def _write_and_watch(emu: Emulator, consumer: Any, say: Callable[[str], None], timeout_s: float) -> Messages:
    written = time.monotonic()
    for statement in WRITES:
        emu.execute(statement)
        say(f"  wrote: {statement}")
    say("reading topic demo.ks.orders (read_committed); the confidence window is 2 s:")
    messages: Messages = []
    while len(messages) < EXPECTED and time.monotonic() - written < timeout_s:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        messages.append((message.key(), message.value()))
        say(f"  +{time.monotonic() - written:4.1f}s {_describe(message.key(), message.value())}")
    return messages


def _describe(key: bytes | None, value: bytes | None) -> str:
    shown_key = key.decode() if key else "null"
    if value is None:
        return f"key={shown_key} tombstone"
    envelope = json.loads(value)
    return (f"key={shown_key} op={envelope['op']} before={json.dumps(envelope['before'])}"
            f" after={json.dumps(envelope['after'])}")


def _stop(worker: subprocess.Popen[bytes], say: Callable[[str], None]) -> None:
    if worker.poll() is None:
        os.kill(worker.pid, signal.SIGTERM)
        try:
            worker.wait(40)
        except subprocess.TimeoutExpired:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(10)
    say(f"worker stopped (exit {worker.returncode})")

