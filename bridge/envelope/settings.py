"""Settings of the translator and serializers. Field names follow the Java connector's property
names (dots become underscores); `bridge.settings.BridgeConfig.envelope_settings()` fills them from
the one settings model, which reads files and the environment.

- `topic.prefix` (required): topic prefix, schema-name prefix and `source.name`.
- `experimental.preimages.enabled` (false): fill `before` from the record's pre-image row
  (needs the table option `preimage`).
- `experimental.postimages.enabled` (false): fill `after` from the record's post-image row, every
  column then a cell (needs the table option `postimage`).
- `cdc.output.format` (legacy): `legacy` (`{"value": ..}` cells, the default) or `advanced`
  (the Java connector 2.x's plain values; `before`/`after` from images only).
- `cdc.include.before` / `cdc.include.after` (none): `none`, `full` or `only-updated`; advanced
  only (legacy refuses anything but `none`, as the connector does).
- `cdc.include.primary-key.placement` (kafka-key,payload-after,payload-before): where the key
  columns go in advanced (`kafka-key`, `payload-after`, `payload-before`, `payload-key`,
  `kafka-headers`; `payload-diff` accepted, no effect); legacy refuses any other set.
- `cdc.include.primary-key.payload-key-name` (key): the envelope field of `payload-key`.
- `cdc.incomplete.task.timeout.ms` (15000): accepted as the connector's (> 0).
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


class OutputFormat(Enum):
    LEGACY = "legacy"
    ADVANCED = "advanced"


class IncludeMode(Enum):
    """`cdc.include.before` / `cdc.include.after`."""

    NONE = "none"
    FULL = "full"
    ONLY_UPDATED = "only-updated"


class KeyPlacement(Enum):
    """`cdc.include.primary-key.placement` members."""

    KAFKA_KEY = "kafka-key"
    PAYLOAD_AFTER = "payload-after"
    PAYLOAD_BEFORE = "payload-before"
    PAYLOAD_KEY = "payload-key"
    KAFKA_HEADERS = "kafka-headers"
    PAYLOAD_DIFF = "payload-diff"  # the connector accepts it and does nothing with it


DEFAULT_KEY_PLACEMENT = frozenset({KeyPlacement.KAFKA_KEY, KeyPlacement.PAYLOAD_AFTER, KeyPlacement.PAYLOAD_BEFORE})


def key_placement(text: str) -> frozenset[KeyPlacement]:
    """A comma-separated placement list; ValueError names an unknown member and the choices."""
    members = [part.strip().lower() for part in text.split(",") if part.strip()]
    known = {p.value: p for p in KeyPlacement}
    for member in members:
        if member not in known:
            raise ValueError(f"unknown placement {member!r}; use any of {', '.join(known)}")
    return frozenset(known[m] for m in members)


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
    cdc_output_format: OutputFormat = OutputFormat.LEGACY
    cdc_include_before: IncludeMode = IncludeMode.NONE
    cdc_include_after: IncludeMode = IncludeMode.NONE
    cdc_include_primary_key_placement: frozenset[KeyPlacement] = DEFAULT_KEY_PLACEMENT
    cdc_include_primary_key_payload_key_name: str = "key"
    cdc_incomplete_task_timeout_ms: int = 15_000
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
        self._check_output_format()

    @property
    def advanced(self) -> bool:
        return self.cdc_output_format is OutputFormat.ADVANCED

    def _check_output_format(self) -> None:
        """The connector's rules (`ScyllaConnectorConfig` validation): image modes and key
        placements are advanced settings; the experimental image switches are legacy ones."""
        if self.cdc_incomplete_task_timeout_ms <= 0:
            raise SettingsError(
                f"cdc.incomplete.task.timeout.ms: must be > 0, not {self.cdc_incomplete_task_timeout_ms}"
            )
        if not self.cdc_include_primary_key_payload_key_name:
            raise SettingsError("cdc.include.primary-key.payload-key-name: must not be empty")
        if self.advanced:
            if self.experimental_preimages_enabled:
                raise SettingsError(
                    "experimental.preimages.enabled: must be false with cdc.output.format=advanced "
                    "(use cdc.include.before)"
                )
            if self.experimental_postimages_enabled:
                raise SettingsError(
                    "experimental.postimages.enabled: must be false with cdc.output.format=advanced "
                    "(use cdc.include.after)"
                )
            return
        for key, mode in (
            ("cdc.include.before", self.cdc_include_before),
            ("cdc.include.after", self.cdc_include_after),
        ):
            if mode is not IncludeMode.NONE:
                raise SettingsError(
                    f"{key}: must be none with cdc.output.format=legacy, not {mode.value} "
                    "(set cdc.output.format=advanced)"
                )
        if self.cdc_include_primary_key_placement != DEFAULT_KEY_PLACEMENT:
            chosen = ",".join(sorted(p.value for p in self.cdc_include_primary_key_placement))
            raise SettingsError(
                f"cdc.include.primary-key.placement: must be kafka-key,payload-after,payload-before "
                f"with cdc.output.format=legacy, not {chosen or 'empty'} (set cdc.output.format=advanced)"
            )
