"""Change records -> Debezium envelopes in the Java connector's formats -> bytes: `legacy` (cells,
the default) or `advanced` (plain values, images, key placement; `cdc.output.format`).

    serializer = build_record_serializer(settings)                   # settings: config.envelope_settings()
    translator = Translator(settings, on_new_plan=serializer.prepare) # Avro schemas registered per plan
    translation = translator.translate(change_record, table_schema)  # pure; plans cached per schema
    for record in translation.records:                               # envelopes, tombstones, side records
        key, value = serializer.serialize(record)                    # JSON (JsonConverter) or Avro bytes
    translation.dropped                                              # {DropReason: count} for the metrics
    translation.missing_images                                       # {"before"|"after": count} (advanced)

The format is described in docs/envelope.md.
"""

from bridge.envelope.advanced_plan import AdvancedPlan, build_advanced_plan
from bridge.envelope.advanced_translate import translate_advanced
from bridge.envelope.errors import (
    EnvelopeError,
    PlanError,
    SerializationError,
    SettingsError,
    TranslationError,
    UnknownColumnError,
)
from bridge.envelope.plan import TablePlan, build_plan
from bridge.envelope.records import DropReason, KafkaRecord, Translation
from bridge.envelope.serializers import RecordSerializer, build_record_serializer
from bridge.envelope.settings import ConverterKind, EnvelopeSettings
from bridge.envelope.translate import translate
from bridge.envelope.translator import Plan, Translator

__all__ = [
    "AdvancedPlan",
    "ConverterKind",
    "DropReason",
    "EnvelopeError",
    "EnvelopeSettings",
    "KafkaRecord",
    "Plan",
    "PlanError",
    "RecordSerializer",
    "SerializationError",
    "SettingsError",
    "TablePlan",
    "Translation",
    "TranslationError",
    "Translator",
    "UnknownColumnError",
    "build_advanced_plan",
    "build_plan",
    "build_record_serializer",
    "translate",
    "translate_advanced",
]
