"""Every name a CQL table can have is accepted by the real Apicurio, which parses what it stores
with Java Avro: quoted column, UDT and UDT field names with `'`, `-`, `.`, spaces, a leading
digit, non-ASCII letters and characters beyond U+FFFF, in keys, cells, element changes, tuples
and map entries. The table is created in Cassandra and its schema loaded from `system_schema` as
the worker loads it; its schemas are registered when the plan is built (`avro` and
`avro_unicode`), and a record decodes with the schema the registry hands back. Under `none` the
registry refuses the names and the error names the subject."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from cassandra.util import SortedSet

from bridge.envelope.errors import SerializationError
from bridge.envelope.names import NameAdjustment
from bridge.envelope.serializers import build_record_serializer
from bridge.envelope.settings import ConverterKind, EnvelopeSettings
from bridge.envelope.translator import Translator
from bridge.kafka.registry import registry_client
from bridge.scylla.model import Operation
from bridge.scylla.schema import TableSchema
from bridge.scylla.table_schema import load_table_schema
from tests.unit.envelope.support import avro_form, de, record, row_with

DDL = [
    'CREATE TYPE {ks}."odd-type" ("it\'s" int, "1st" text, "naïve" text, "x😀" int)',
    'CREATE TABLE {ks}."Orders" ("pk-1" int, "ck.x" text, "st-at" text static, "it\'s" text, "1st" int,'
    ' "naïve" text, "中文" text, "x😀" text, "sp ace" text, "my-set" set<int>,'
    ' "my-map" map<text, frozen<"odd-type">>, "u-dt" "odd-type", "tu-p" frozen<tuple<int, text>>,'
    ' PRIMARY KEY ("pk-1", "ck.x"))',
]


@pytest.fixture
def awkward_table(cassandra_session: Any, keyspace: str) -> TableSchema:
    for statement in DDL:
        cassandra_session.execute(statement.format(ks=keyspace))
    return load_table_schema(cassandra_session, keyspace, "Orders")


def _settings(registry_url: str, mode: NameAdjustment) -> EnvelopeSettings:
    return EnvelopeSettings(
        f"my-shop-{uuid.uuid4().hex[:8]}",  # `-` in the prefix: struct names need the adjustment too
        key_converter=ConverterKind.AVRO,
        value_converter=ConverterKind.AVRO,
        key_converter_schema_registry_url=registry_url,
        value_converter_schema_registry_url=registry_url,
        dropped_changes_topic=f"dropped-{uuid.uuid4().hex[:8]}",
        schema_name_adjustment_mode=mode,
        field_name_adjustment_mode=mode,
    )


def _decoder(url: str) -> Callable[[bytes, str, bool], Any]:
    client = registry_client(url).client  # imports the registry package without authlib's warning
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(client)

    def decode(data: bytes, topic: str, is_key: bool) -> Any:
        return deserialize(data, SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE))

    return decode


@pytest.mark.parametrize("mode", [NameAdjustment.AVRO, NameAdjustment.AVRO_UNICODE], ids=lambda m: m.value)
def test_awkward_cql_names_are_registered_and_decode(
    awkward_table: TableSchema, schema_registry_url: str, mode: NameAdjustment
) -> None:
    settings = _settings(schema_registry_url, mode)
    serializer = build_record_serializer(settings, registry_client)
    translator = Translator(settings, on_new_plan=serializer.prepare)
    plan = translator.plan(awkward_table)  # registers key, envelope and side-topic schemas, or raises
    client = registry_client(schema_registry_url).client
    for subject in (f"{plan.topic}-key", f"{plan.topic}-value"):
        assert client.get_versions(subject) == [1]  # type: ignore[attr-defined]
    values = {
        "pk-1": 7, "ck.x": "c", "st-at": "s", "it's": "apostrophe", "1st": 1, "naïve": "n", "中文": "z",
        "x😀": "e", "sp ace": "sp", "my-set": SortedSet([1, 2]), de("my-set"): None,
        "my-map": {"k": {"it's": 1, "1st": "a", "naïve": None, "x😀": 2}},
        "u-dt": {"it's": 3, "1st": None, "naïve": "b", "x😀": None}, "tu-p": (4, "t"),
    }  # fmt: skip
    translation = translator.translate(record(awkward_table, row_with(Operation.UPDATE, values)), awkward_table)
    out = translation.records[0]
    assert out.value is not None and out.value["after"]["my-set__elements"] == {"added": [1, 2], "removed": None}
    key, value = serializer.serialize(out)
    assert key is not None and value is not None
    decode = _decoder(schema_registry_url)
    assert decode(key, plan.topic, True) == avro_form(out.key, plan.key_schema, mode)
    assert out.value_schema is not None
    assert decode(value, plan.topic, False) == avro_form(out.value, out.value_schema, mode)


def test_without_adjustment_the_registry_refuses_the_names(
    awkward_table: TableSchema, schema_registry_url: str
) -> None:
    settings = _settings(schema_registry_url, NameAdjustment.NONE)
    serializer = build_record_serializer(settings, registry_client)
    translator = Translator(settings, on_new_plan=serializer.prepare)
    with pytest.raises(SerializationError, match=r"registering the schema of subject my-shop-\w+\.ks\w+\.Orders-key"):
        translator.plan(awkward_table)
