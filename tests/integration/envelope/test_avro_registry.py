"""Avro against the real stack: envelopes serialized with our serializer (schemas registered in
Apicurio through its Confluent-compatible API) are produced to Kafka, read back with a
read_committed consumer and decoded with confluent-kafka's own AvroDeserializer; a table altered
with a new column registers a new, compatible schema version."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from cassandra.util import Date, OrderedMap, SortedSet

from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.avro_serializer import AvroSerializer
from bridge.envelope.records import KafkaRecord
from bridge.envelope.serializers import build_record_serializer
from bridge.envelope.settings import ConverterKind, EnvelopeSettings
from bridge.envelope.translator import Translator
from bridge.kafka.registry import avro_schema_object, registry_client
from bridge.scylla.model import Operation
from bridge.scylla.schema import TableSchema
from tests.unit.envelope.support import d, de, make_table, record, row, row_with

COLUMNS = [
    ("v", "text"),
    ("n", "bigint"),
    ("f", "float"),
    ("b", "blob"),
    ("dt", "date"),
    ("dec", "decimal"),
    ("m", "map<int, text>"),
    ("st", "set<int>"),
]


def table(extra: list[tuple[str, str]] | None = None) -> TableSchema:
    return make_table(
        partition=[("pk", "uuid")], clustering=[("ck", "int")], regular=COLUMNS + (extra or []), name="orders"
    )


def deserializer_for(url: str) -> Callable[[bytes, str, bool], Any]:
    client = registry_client(url).client  # imports the registry package without authlib's warning
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(client)

    def decode(data: bytes, topic: str, is_key: bool) -> Any:
        field = MessageField.KEY if is_key else MessageField.VALUE
        return deserialize(data, SerializationContext(topic, field))

    return decode


def produce(bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes | None]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in messages:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def consume(make_consumer: Callable[..., Any], topic: str, count: int) -> list[Any]:
    consumer = make_consumer()
    consumer.subscribe([topic])
    got: list[Any] = []
    for _ in range(120):
        message = consumer.poll(0.5)
        if message is None:
            if len(got) >= count:
                break
            continue
        assert message.error() is None, message.error()
        got.append(message)
    return got


def test_envelopes_round_trip_through_kafka_and_the_registry(
    kafka_bootstrap: str, schema_registry_url: str, make_topic: Callable[..., str], make_consumer: Callable[..., Any]
) -> None:
    settings = EnvelopeSettings(
        "p" + uuid.uuid4().hex[:8],
        key_converter=ConverterKind.AVRO,
        value_converter=ConverterKind.AVRO,
        key_converter_schema_registry_url=schema_registry_url,
        value_converter_schema_registry_url=schema_registry_url,
    )
    serializer = build_record_serializer(settings, registry_client)
    translator = Translator(settings, on_new_plan=serializer.prepare)
    schema = table()
    plan = translator.plan(schema)  # registers the key and value schemas
    make_topic(plan.topic)
    pk = uuid.uuid4()
    written: list[KafkaRecord] = []
    for log_row in (
        row(
            Operation.INSERT,
            pk=pk,
            ck=1,
            v="zażółć",
            n=2**40,
            f=1.5,
            b=b"\x00\xff",
            dt=Date(datetime.date(2024, 6, 10)),
            dec=decimal.Decimal("12.50"),
        ),
        row_with(Operation.UPDATE, {"pk": pk, "ck": 1, "m": OrderedMap([(1, "a")]), de("st"): SortedSet([3])}),
        row_with(Operation.UPDATE, {"pk": pk, "ck": 1, d("v"): True, "st": SortedSet([1, 2]), d("st"): True}),
        row(Operation.ROW_DELETE, pk=pk, ck=1),
    ):
        written += translator.translate(record(schema, log_row), schema).records
    produce(kafka_bootstrap, plan.topic, [serializer.serialize(r) for r in written])

    messages = consume(make_consumer, plan.topic, len(written))
    assert len(messages) == len(written) == 5
    decode = deserializer_for(schema_registry_url)
    for message, sent in zip(messages, written, strict=True):
        assert message.key()[0] == 0  # Confluent framing
        assert decode(message.key(), plan.topic, True) == sent.key
        if sent.value is None:
            assert message.value() is None  # the tombstone
            continue
        got = decode(message.value(), plan.topic, False)
        expected = sent.value
        if expected["after"] is not None and expected["op"] == "c":
            # the deserializer turns the Avro `date` logical type into a date object
            expected = {**expected, "after": {**expected["after"], "dt": {"value": datetime.date(2024, 6, 10)}}}
        assert got == expected
    assert [m.value() is None for m in messages] == [False, False, False, False, True]


def test_an_added_column_registers_a_new_compatible_version(schema_registry_url: str) -> None:
    """ALTER TABLE ADD: the altered table's plan registers version 2 of `<topic>-value` under a
    BACKWARD compatibility rule the registry enforces; the key schema stays at version 1."""
    registry = registry_client(schema_registry_url)
    client = registry.client
    topic = f"evolve-{uuid.uuid4().hex[:8]}"
    settings = EnvelopeSettings("p")
    old_plan, new_plan = Translator(settings).plan(table()), Translator(settings).plan(table([("added", "int")]))
    values, keys = AvroSerializer(registry, is_key=False), AvroSerializer(registry, is_key=True)
    first = values.register(topic, old_plan.value_schema)
    keys.register(topic, old_plan.key_schema)
    client.set_compatibility(subject_name=f"{topic}-value", level="BACKWARD")  # type: ignore[attr-defined]
    candidate = avro_schema_object(json.dumps(avro_schema(new_plan.value_schema)))
    assert client.test_compatibility(f"{topic}-value", candidate) is True  # type: ignore[attr-defined]
    second = values.register(topic, new_plan.value_schema)
    assert second != first
    assert client.get_versions(f"{topic}-value") == [1, 2]  # type: ignore[attr-defined]
    assert keys.register(topic, new_plan.key_schema) == keys.register(topic, old_plan.key_schema)
    assert client.get_versions(f"{topic}-key") == [1]  # type: ignore[attr-defined]


def test_registry_errors_are_reported_with_the_subject() -> None:
    from bridge.envelope.errors import SerializationError

    unreachable = registry_client("http://127.0.0.1:9/apis/ccompat/v7", **{"max.retries": 0})
    serializer = AvroSerializer(unreachable, is_key=True)
    plan = Translator(EnvelopeSettings("p")).plan(table())
    with pytest.raises(SerializationError, match="registering the schema of subject t-key"):
        serializer.register("t", plan.key_schema)
