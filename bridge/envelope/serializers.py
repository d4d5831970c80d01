"""Key and value serializers chosen by the settings (`key.converter`, `value.converter`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bridge.envelope.avro_serializer import AvroSerializer, SchemaRegistry, registry_client
from bridge.envelope.connect_schema import ConnectSchema
from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.records import KafkaRecord
from bridge.envelope.settings import ConverterKind, EnvelopeSettings


class Serializer(Protocol):
    def serialize(self, topic: str, schema: ConnectSchema | None, value: Any) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class RecordSerializer:
    """Turns a `KafkaRecord` into the key and value bytes to produce (value None = tombstone)."""

    key: Serializer
    value: Serializer

    def serialize(self, record: KafkaRecord) -> tuple[bytes | None, bytes | None]:
        return (
            self.key.serialize(record.topic, record.key_schema, record.key),
            self.value.serialize(record.topic, record.value_schema, record.value),
        )


def build_record_serializer(
    settings: EnvelopeSettings, registry_factory: Callable[[str], SchemaRegistry] = registry_client
) -> RecordSerializer:
    registries: dict[str, SchemaRegistry] = {}

    def side(kind: ConverterKind, schemas_enable: bool, url: str | None, is_key: bool) -> Serializer:
        if kind is ConverterKind.JSON:
            return JsonSerializer(schemas_enable)
        assert url is not None  # EnvelopeSettings checks it
        if url not in registries:
            registries[url] = registry_factory(url)
        return AvroSerializer(registries[url], is_key)

    return RecordSerializer(
        side(
            settings.key_converter,
            settings.key_converter_schemas_enable,
            settings.key_converter_schema_registry_url,
            True,
        ),
        side(
            settings.value_converter,
            settings.value_converter_schemas_enable,
            settings.value_converter_schema_registry_url,
            False,
        ),
    )
