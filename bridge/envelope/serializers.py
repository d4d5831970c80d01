"""Key and value serializers chosen by the settings (`key.converter`, `value.converter`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bridge.envelope.advanced_plan import AdvancedPlan
from bridge.envelope.avro_serializer import AvroSerializer, SchemaRegistry
from bridge.envelope.connect_schema import ConnectSchema
from bridge.envelope.errors import SettingsError
from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.plan import TablePlan
from bridge.envelope.records import KafkaRecord
from bridge.envelope.settings import ConverterKind, EnvelopeSettings


class Serializer(Protocol):
    def prepare(self, topic: str, schema: ConnectSchema) -> None:
        """Whatever must happen once per schema before `serialize` (registering it)."""

    def serialize(self, topic: str, schema: ConnectSchema | None, value: Any) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class RecordSerializer:
    """Turns a `KafkaRecord` into the key and value bytes to produce (value None = tombstone)."""

    key: Serializer
    value: Serializer

    def prepare(self, plan: TablePlan | AdvancedPlan) -> None:
        """Registers every schema the records of `plan` can carry (the data topic's key and
        envelope, the dropped-changes side topic's), so that `serialize` needs no registry.
        Give it to `Translator(on_new_plan=...)`: it then runs once per plan, when it is built."""
        if plan.key_schema is not None:  # advanced without kafka-key: no Kafka key
            self.key.prepare(plan.topic, plan.key_schema)
        self.value.prepare(plan.topic, plan.value_schema)
        if plan.dropped is not None:
            self.key.prepare(plan.dropped.topic, plan.dropped.key_schema)
            self.value.prepare(plan.dropped.topic, plan.dropped.value_schema)

    def serialize(self, record: KafkaRecord) -> tuple[bytes | None, bytes | None]:
        return (
            self.key.serialize(record.topic, record.key_schema, record.key),
            self.value.serialize(record.topic, record.value_schema, record.value),
        )


def build_record_serializer(
    settings: EnvelopeSettings, registry_factory: Callable[[str], SchemaRegistry] | None = None
) -> RecordSerializer:
    """The serializers the settings choose; an Avro side gets a registry from `registry_factory`
    (one per URL; `bridge.kafka.registry.registry_client` for a real one)."""
    registries: dict[str, SchemaRegistry] = {}

    def side(kind: ConverterKind, schemas_enable: bool, url: str | None, is_key: bool) -> Serializer:
        if kind is ConverterKind.JSON:
            return JsonSerializer(schemas_enable)
        assert url is not None  # EnvelopeSettings checks it
        if registry_factory is None:
            raise SettingsError(f"{'key' if is_key else 'value'}.converter: avro needs a schema registry client")
        if url not in registries:
            registries[url] = registry_factory(url)
        return AvroSerializer(
            registries[url], is_key, settings.field_name_adjustment_mode, settings.schema_name_adjustment_mode
        )

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
