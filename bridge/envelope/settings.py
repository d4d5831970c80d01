"""Settings of the translator and serializers. Field names follow the Java connector's property
names (dots become underscores); `bridge.settings.BridgeConfig.envelope_settings()` fills them from
the one settings model, which reads files and the environment.

- `topic.prefix` (required): topic prefix, schema-name prefix and `source.name`.
- `experimental.preimages.enabled` (false): fill `before` from the record's pre-image row
  (needs the table option `preimage`).
- `experimental.postimages.enabled` (false): fill `after` from the record's post-image row, every
  column then a cell (needs the table option `postimage`).
- `tombstones.on.delete` (true): a null-value record with the same key follows every delete.
- `key.converter` / `value.converter` (json): `json` (Kafka Connect's JsonConverter) or `avro`
  (Confluent framing + schema registry); Connect converter class names are accepted too.
- `key.converter.schemas.enable` / `value.converter.schemas.enable` (true, Connect's default):
  JSON only, `{"schema":..,"payload":..}` or the bare payload.
- `key.converter.schema.registry.url` / `value.converter.schema.registry.url` (none): Avro only,
  the Confluent-compatible registry.
- `dropped.changes.topic` (none): opt-in side topic for range deletes and partition deletes of
  clustered tables, which otherwise give no event and are only counted.
- `schema.name.adjustment.mode` (avro): `none`, `avro` or `avro_unicode`, Debezium's adjustment
  of struct names (`bridge.envelope.names`); `avro` is what the Java connector always does.
- `field.name.adjustment.mode` (avro): the same for field names, applied to the Avro schemas (a
  quoted CQL name such as `"it's"` is no Avro name); JSON keeps the names as the table has them,
  as the Java connector writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bridge.envelope.errors import SettingsError
from bridge.envelope.names import NameAdjustment


class ConverterKind(Enum):
    JSON = "json"
    AVRO = "avro"


_CONVERTER_ALIASES = {
    "json": ConverterKind.JSON,
    "org.apache.kafka.connect.json.jsonconverter": ConverterKind.JSON,
    "avro": ConverterKind.AVRO,
    "io.confluent.connect.avro.avroconverter": ConverterKind.AVRO,
    "io.apicurio.registry.utils.converter.avroconverter": ConverterKind.AVRO,
}


def converter_kind(text: str) -> ConverterKind:
    """`json`, `avro` or a Connect converter class name; ValueError names the choices."""
    kind = _CONVERTER_ALIASES.get(text.strip().lower())
    if kind is None:
        raise ValueError(f"unknown converter {text!r}; use one of {', '.join(sorted(_CONVERTER_ALIASES))}")
    return kind


@dataclass(frozen=True, slots=True)
class EnvelopeSettings:
    topic_prefix: str
    experimental_preimages_enabled: bool = False
    experimental_postimages_enabled: bool = False
    tombstones_on_delete: bool = True
    key_converter: ConverterKind = ConverterKind.JSON
    value_converter: ConverterKind = ConverterKind.JSON
    key_converter_schemas_enable: bool = True
    value_converter_schemas_enable: bool = True
    key_converter_schema_registry_url: str | None = None
    value_converter_schema_registry_url: str | None = None
    dropped_changes_topic: str | None = None
    schema_name_adjustment_mode: NameAdjustment = NameAdjustment.AVRO
    field_name_adjustment_mode: NameAdjustment = NameAdjustment.AVRO

    def __post_init__(self) -> None:
        if not self.topic_prefix:
            raise SettingsError("topic.prefix: required, must not be empty")
        for side in ("key", "value"):
            kind = getattr(self, f"{side}_converter")
            url = getattr(self, f"{side}_converter_schema_registry_url")
            if kind is ConverterKind.AVRO and not url:
                raise SettingsError(f"{side}.converter.schema.registry.url: required when {side}.converter is avro")
