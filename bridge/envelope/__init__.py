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


The names below are imported when first used (`__getattr__`): a module that needs one of
the envelope's modules (the settings need `bridge.envelope.errors`) does not load the others.
(`translate` is not among them: it would be shadowed by its module once that is imported;
`from bridge.envelope.translate import translate`.)
A command that only reads Kafka (`cdc-bridge offsets show`) starts that much sooner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.lazy_names import lazy_names

if TYPE_CHECKING:
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
    from bridge.envelope.translator import Plan, Translator

_WHERE = {
    "AdvancedPlan": "bridge.envelope.advanced_plan",
    "ConverterKind": "bridge.envelope.settings",
    "DropReason": "bridge.envelope.records",
    "EnvelopeError": "bridge.envelope.errors",
    "EnvelopeSettings": "bridge.envelope.settings",
    "KafkaRecord": "bridge.envelope.records",
    "Plan": "bridge.envelope.translator",
    "PlanError": "bridge.envelope.errors",
    "RecordSerializer": "bridge.envelope.serializers",
    "SerializationError": "bridge.envelope.errors",
    "SettingsError": "bridge.envelope.errors",
    "TablePlan": "bridge.envelope.plan",
    "Translation": "bridge.envelope.records",
    "TranslationError": "bridge.envelope.errors",
    "Translator": "bridge.envelope.translator",
    "UnknownColumnError": "bridge.envelope.errors",
    "build_advanced_plan": "bridge.envelope.advanced_plan",
    "build_plan": "bridge.envelope.plan",
    "build_record_serializer": "bridge.envelope.serializers",
    "translate_advanced": "bridge.envelope.advanced_translate",
}

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
    "translate_advanced",
]


__getattr__ = lazy_names(__name__, _WHERE, globals())
