"""Envelope settings, serializer choice, plan caching."""

from __future__ import annotations

import pytest

from bridge.envelope.avro_serializer import AvroSerializer
from bridge.envelope.errors import SettingsError
from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.serializers import build_record_serializer
from bridge.envelope.settings import ConverterKind, EnvelopeSettings
from bridge.envelope.translator import Translator
from bridge.scylla.model import Operation
from bridge_devstack.testing import InProcessRegistry
from tests.unit.envelope.support import make_table, record, row


def test_settings_check_what_only_makes_sense_together() -> None:
    with pytest.raises(SettingsError, match=r"^topic\.prefix: required, must not be empty$"):
        EnvelopeSettings("")
    with pytest.raises(SettingsError, match=r"^key\.converter\.schema\.registry\.url: required when key"):
        EnvelopeSettings("p", key_converter=ConverterKind.AVRO)


def test_serializers_follow_the_converter_settings() -> None:
    created: list[str] = []

    def registry(url: str) -> InProcessRegistry:
        created.append(url)
        return InProcessRegistry()

    settings = EnvelopeSettings(
        "p",
        key_converter=ConverterKind.AVRO,
        value_converter=ConverterKind.AVRO,
        key_converter_schema_registry_url="http://r",
        value_converter_schema_registry_url="http://r",
    )
    serializer = build_record_serializer(settings, registry)
    assert isinstance(serializer.key, AvroSerializer) and isinstance(serializer.value, AvroSerializer)
    assert created == ["http://r"]  # one client per registry
    json_side = build_record_serializer(EnvelopeSettings("p", value_converter_schemas_enable=False))
    assert isinstance(json_side.key, JsonSerializer) and json_side.key.schemas_enable
    assert isinstance(json_side.value, JsonSerializer) and not json_side.value.schemas_enable
    table = make_table(partition=[("pk", "int")], regular=[("v", "int")])
    out = Translator(EnvelopeSettings("p")).translate(record(table, row(Operation.ROW_DELETE, pk=1)), table)
    key, value = json_side.serialize(out.records[1])
    assert key == (
        b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"pk"}],'
        b'"optional":false,"name":"p.ks.t.Key"},"payload":{"pk":1}}'
    )
    assert value is None


def test_translator_builds_a_plan_once_per_table_schema() -> None:
    table = make_table(partition=[("pk", "int")], regular=[("v", "int")])
    same = make_table(partition=[("pk", "int")], regular=[("v", "int")])
    altered = make_table(partition=[("pk", "int")], regular=[("v", "int"), ("w", "int")])
    ticks = iter([1_000_000, 2_000_000])
    translator = Translator(EnvelopeSettings("p"), clock_micros=lambda: next(ticks))
    first = translator.plan(table)
    assert translator.plan(table) is first and translator.plan(same) is first
    assert translator.plan(altered) is not first
    out = translator.translate(record(table, row(Operation.UPDATE, pk=1, v=2)), table)
    assert out.records[0].value is not None and out.records[0].value["ts_ms"] == 1000
    out = translator.translate(record(altered, row(Operation.UPDATE, pk=1, w=2)), altered)
    assert out.records[0].value is not None and out.records[0].value["after"]["w"] == {"value": 2}


def test_a_record_of_another_table_is_refused() -> None:
    from bridge.envelope.errors import TranslationError

    table = make_table(partition=[("pk", "int")], regular=[("v", "int")])
    other = make_table(partition=[("pk", "int")], regular=[("v", "int")], name="other")
    translator = Translator(EnvelopeSettings("p"))
    with pytest.raises(TranslationError, match=r"record of ks\.other given to the plan of ks\.t"):
        translator.translate(record(other, row(Operation.UPDATE, pk=1)), table)


def test_unbalanced_range_bounds_are_an_error() -> None:
    from bridge.envelope.errors import TranslationError

    table = make_table(partition=[("pk", "int")], clustering=[("ck", "int")])
    translator = Translator(EnvelopeSettings("p"))
    with pytest.raises(TranslationError, match=r"batch_seq_no 0 .*end bound without a start bound"):
        translator.translate(record(table, row(Operation.RANGE_DELETE_END_INCLUSIVE, pk=1, ck=1)), table)
    with pytest.raises(TranslationError, match="start bound without its end bound"):
        translator.translate(record(table, row(Operation.RANGE_DELETE_START_INCLUSIVE, pk=1, ck=1)), table)


def test_quoted_column_names_cannot_inject_code_into_generated_builders() -> None:
    """Plans generate Python for the row and key builders and the Avro encoder; column names
    (quoted CQL identifiers can hold anything) only ever appear there as string literals."""
    from tests.unit.envelope.support import Wire, row_with

    weird = ["it's", 'say "hi"', "new\nline", "back\\slash", "x'] + __import__('os').getpid() + ['"]
    table = make_table(partition=[(weird[0], "int")], regular=[(name, "text") for name in weird[1:]])
    values: dict[str, object] = {weird[0]: 1, **{name: name for name in weird[1:]}}
    out = Translator(EnvelopeSettings("p")).translate(record(table, row_with(Operation.INSERT, values)), table)
    key, value = Wire().check(out.records[0])  # JSON with and without schemas, Avro, fastavro's bytes
    assert key == {"it's": 1}
    assert value["after"] == {weird[0]: 1, **{name: {"value": name} for name in weird[1:]}}
