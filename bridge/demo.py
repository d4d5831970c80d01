"""`cdc-bridge demo`: the pipeline so far, end to end on the local stack.

ScyllaDB-style writes through the emulator -> CDC log rows in Cassandra -> the CDC source reads
them behind a 2 s confidence window -> Debezium envelopes (legacy `{"value": ...}` cells, JSON
without schemas) -> a Kafka topic, read back with `read_committed`.

It is a preview: the worker (slot assignment, transactions with offsets, metrics) is not built
yet, so this produces with a plain idempotent producer and keeps no offsets.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from bridge.envelope import EnvelopeSettings, Translator, build_record_serializer
from bridge.scylla.events import GroupDiscovered, ReaderFailed, RecordRead
from bridge.scylla.model import ChangeRecord
from bridge.scylla.reader import SourceReader
from bridge.scylla.settings import ReaderSettings
from bridge.sim import Emulator
from bridge.sim.settings import SimSettings
from bridge.stack.layout import Endpoints

TOPIC_PREFIX = "demo"
Messages = list[tuple[bytes | None, bytes | None]]  # (key, value); a None value is a tombstone
WRITES = (
    "INSERT INTO {t} (id, customer, total, items) VALUES (1, 'ada', 12.5, {{'pen': 2}})",
    "INSERT INTO {t} (id, customer, total, items) VALUES (2, 'linus', 99.0, {{'book': 1}})",
    "UPDATE {t} SET total = 15.0, items = items + {{'ink': 1}} WHERE id = 1",
    "UPDATE {t} SET customer = null WHERE id = 2",
    "DELETE FROM {t} WHERE id = 2",
)


def write_changes(emu: Emulator, keyspace: str) -> list[ChangeRecord]:
    table = f"{keyspace}.orders"
    emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    emu.execute(
        f"CREATE TABLE {table} (id int PRIMARY KEY, customer text, total double, items map<text, int>)"
        " WITH cdc = {'enabled': true, 'preimage': true}"
    )
    return [record for statement in WRITES for record in emu.execute(statement.format(t=table))]


def read_records(session: Any, keyspace: str, expected: int, timeout_s: float = 60.0) -> list[RecordRead]:
    """Every record of `keyspace.orders`, read the way the worker will: discover, start, poll."""
    settings = ReaderSettings(
        confidence_window_size_ms=2_000,
        vnodes_metadata_keyspace=SimSettings().vnodes_keyspace,
        tablets_metadata_keyspace=SimSettings().tablets_keyspace,
        initial_lookback_ms=120_000,
    )
    reader = SourceReader(session, settings)
    read: list[RecordRead] = []
    try:
        reader.watch_table(keyspace, "orders")
        deadline = time.monotonic() + timeout_s
        while len(read) < expected and time.monotonic() < deadline:
            for event in reader.poll(0.5):
                if isinstance(event, GroupDiscovered):
                    reader.start_group(event.group.id)
                elif isinstance(event, RecordRead):
                    read.append(event)
                elif isinstance(event, ReaderFailed):
                    raise RuntimeError(f"the CDC source failed: {event}")
    finally:
        reader.close()
    if len(read) < expected:
        raise RuntimeError(f"read {len(read)} of {expected} records in {timeout_s:.0f}s")
    return read


def produce(bootstrap: str, emu: Emulator, keyspace: str, records: list[RecordRead]) -> tuple[str, int]:
    """Translate and produce; returns the topic and how many Kafka records went to it."""
    from confluent_kafka import Producer

    translator = Translator(EnvelopeSettings(topic_prefix=TOPIC_PREFIX, value_converter_schemas_enable=False,
                                             key_converter_schemas_enable=False,
                                             experimental_preimages_enabled=True))
    serializer = build_record_serializer(translator.settings)
    schema = emu.table(keyspace, "orders").schema
    # murmur2 of the key bytes: the partitions the Java connector's records go to.
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random"})
    count, topic = 0, ""
    for read in records:
        for record in translator.translate(read.record, schema).records:
            key, value = serializer.serialize(record)
            producer.produce(record.topic, key=key, value=value)
            count, topic = count + 1, record.topic
    if producer.flush(30):
        raise RuntimeError("Kafka did not acknowledge every record within 30 s")
    return topic, count


def consume(bootstrap: str, topic: str, expected: int, timeout_s: float = 30.0) -> Messages:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-demo-check",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    messages: Messages = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                messages.append((message.key(), message.value()))
    finally:
        consumer.close()
    return messages


def run(endpoints: Endpoints, say: Callable[[str], None] = print) -> Messages:
    keyspace = time.strftime("demo_%Y%m%d_%H%M%S")
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        written = write_changes(emu, keyspace)
        say(f"wrote {len(WRITES)} statements to {keyspace}.orders: {len(written)} CDC records in its log table")
        records = read_records(emu.session, keyspace, len(written))
        say(f"read {len(records)} records behind the 2 s confidence window")
        topic, count = produce(endpoints.kafka_bootstrap, emu, keyspace, records)
    say(f"produced {count} Kafka records to {topic}; reading them back:")
    messages = consume(endpoints.kafka_bootstrap, topic, count)
    for key, value in messages:
        shown = value.decode() if value is not None else "null (tombstone)"
        say(f"  key={key.decode() if key is not None else 'null'} value={shown}")
    return messages


def register(commands: Any) -> None:
    demo = commands.add_parser("demo", help="run the pipeline so far on the local stack",
                               description=__doc__.splitlines()[0] if __doc__ else None)
    demo.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    del args
    run(Endpoints.from_env())
    return 0

