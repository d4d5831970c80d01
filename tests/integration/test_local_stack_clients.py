"""The local stack's servers are real: produce and consume through Kafka (plain and transactional),
and create, write and read a Cassandra table."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer


def _drain(consumer: Any, expected: int, timeout_s: float = 30.0) -> list[Any]:
    messages: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"consumer error: {message.error()}")
        messages.append(message)
    return messages


def test_produce_and_consume(
    kafka_bootstrap: str, make_topic: Callable[..., str], topic_name: str, make_consumer: Callable[..., Any]
) -> None:
    topic = make_topic(topic_name, partitions=3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    sent = {f"key-{i}".encode(): f"value-{i}".encode() for i in range(30)}
    for key, value in sent.items():
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0

    consumer = make_consumer()
    consumer.subscribe([topic])
    received = {m.key(): m.value() for m in _drain(consumer, len(sent))}
    assert received == sent


def test_transactional_produce_is_visible_only_when_committed(
    kafka_bootstrap: str, make_topic: Callable[..., str], topic_name: str, make_consumer: Callable[..., Any]
) -> None:
    topic = make_topic(topic_name)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"})
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"aborted")
    assert producer.flush(30) == 0  # on the broker before the abort (an abort purges unsent records)
    producer.abort_transaction(30)

    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=b"k", value=f"committed-{i}".encode())
    producer.commit_transaction(30)

    committed = make_consumer(**{"isolation.level": "read_committed"})
    committed.subscribe([topic])
    values = [m.value() for m in _drain(committed, 3)]
    assert values == [b"committed-0", b"committed-1", b"committed-2"]

    # read_uncommitted also sees the aborted record: the broker really ran two transactions.
    uncommitted = make_consumer(**{"isolation.level": "read_uncommitted"})
    uncommitted.subscribe([topic])
    assert [m.value() for m in _drain(uncommitted, 4)] == [b"aborted", b"committed-0", b"committed-1", b"committed-2"]


def test_cassandra_table_roundtrip(cassandra_session: Any, keyspace: str) -> None:
    cassandra_session.execute(
        f"CREATE TABLE {keyspace}.items (pk int, ck int, v text, tags set<text>, PRIMARY KEY (pk, ck))"
    )
    insert = cassandra_session.prepare(f"INSERT INTO {keyspace}.items (pk, ck, v, tags) VALUES (?, ?, ?, ?)")
    for ck in range(5):
        cassandra_session.execute(insert, (1, ck, f"v{ck}", {f"t{ck}", "all"}))
    cassandra_session.execute(f"UPDATE {keyspace}.items USING TTL 300 SET v = 'changed' WHERE pk = 1 AND ck = 2")

    rows = list(cassandra_session.execute(f"SELECT ck, v, tags, TTL(v) AS ttl FROM {keyspace}.items WHERE pk = 1"))
    assert [r.ck for r in rows] == [0, 1, 2, 3, 4]
    assert rows[2].v == "changed" and 0 < rows[2].ttl <= 300
    assert rows[4].tags == {"t4", "all"}
