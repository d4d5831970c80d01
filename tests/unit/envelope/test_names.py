"""Avro name adjustment (`schema.name.adjustment.mode`, `field.name.adjustment.mode`) as
Debezium's adjusters do it, and schema registration when a plan is built, never in `serialize`."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.avro_serializer import AvroSerializer
from bridge.envelope.errors import SerializationError
from bridge.envelope.names import (
    NameAdjustment,
    SchemaNames,
    adjust_field_name,
    adjust_schema_name,
    avro_full_name,
)
from bridge.envelope.serializers import build_record_serializer
from bridge.envelope.settings import ConverterKind, EnvelopeSettings
from bridge.envelope.translator import Translator
from bridge.scylla.model import Operation
from bridge_devstack.testing import InProcessRegistry
from tests.unit.envelope.support import Wire, make_table, record, row_with

NONE, AVRO, UNICODE = NameAdjustment.NONE, NameAdjustment.AVRO, NameAdjustment.AVRO_UNICODE
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # the Avro spec's name rule (Java Avro, ASCII)
AWKWARD = ["it's", "my-col", "naïve", "1st", "a.b", "中文", "x😀", "_u005f", "Ωmega", "sp ace"]


@pytest.mark.parametrize(
    ("name", "mode", "expected"),
    [
        ("my-prefix.ks.t.Key", AVRO, "my_prefix.ks.t.Key"),
        ("1st.ks", AVRO, "_1st.ks"),  # Debezium keeps a leading digit behind the `_`
        ("_hello_语言.", UNICODE, "_u005fhello_u005f_u8bed_u8a00."),  # Debezium's own test case
        ("1st.ks", UNICODE, "_u0031st.ks"),
        ("x😀", AVRO, "x__"),  # Java sees two UTF-16 units
        ("x😀", UNICODE, "x_ud83d_ude00"),
        ("Ωx", UNICODE, "_u3a9x"),  # Integer.toHexString, padded only when two digits or fewer
        ("my-prefix.ks.t.Key", NONE, "my-prefix.ks.t.Key"),
    ],
)
def test_schema_names_are_adjusted_as_debezium_adjusts_them(name: str, mode: NameAdjustment, expected: str) -> None:
    assert adjust_schema_name(name, mode) == expected


def test_field_names_lose_their_dots_schema_names_keep_them() -> None:
    assert adjust_field_name("a.b", AVRO) == "a_b" and adjust_schema_name("a.b", AVRO) == "a.b"
    assert adjust_field_name("it's", AVRO) == "it_s" and adjust_field_name("it's", UNICODE) == "it_u0027s"
    assert adjust_field_name("it's", NONE) == "it's"
    assert adjust_field_name("plain_name1", AVRO) == "plain_name1"


@given(st.text(min_size=1, max_size=12))
def test_adjusted_field_names_are_valid_avro_names(name: str) -> None:
    for mode in (AVRO, UNICODE):
        assert AVRO_NAME.fullmatch(adjust_field_name(name, mode)), (name, mode)


@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4))
def test_adjusted_schema_names_are_valid_avro_full_names(parts: list[str]) -> None:
    name = "shop.ks.t." + ".".join(parts) + ".Cell"
    for mode in (AVRO, UNICODE):
        full = avro_full_name(adjust_schema_name(name, mode), mode)
        assert all(AVRO_NAME.fullmatch(part) for part in full.split(".")), (name, mode, full)


def test_a_namespace_part_that_starts_with_a_digit_is_repaired_for_avro_only() -> None:
    """`shop.ks.t.1st.Cell` passes Debezium's adjuster but Java Avro refuses `1st` as a
    namespace; the Avro schema gets `_1st`, the Connect (JSON) name stays Debezium's."""
    table = make_table(partition=[("pk", "int")], regular=[("1st", "int")])
    plan = Translator(EnvelopeSettings("shop")).plan(table)
    cell = plan.after_schema.field("1st").schema
    assert cell.name == "shop.ks.t.1st.Cell"
    after = avro_schema(plan.after_schema)[1]  # ["null", record]: `after` is optional
    field = next(f for f in after["fields"] if f["name"] == "_1st")
    assert field["type"][1]["namespace"] == "shop.ks.t._1st" and field["type"][1]["connect.name"] == cell.name
    assert avro_full_name("a..b", AVRO) == "a._.b"
    assert avro_full_name("shop.ks.t.1st.Cell", NONE) == "shop.ks.t.1st.Cell"


def test_struct_names_are_adjusted_once_as_a_whole() -> None:
    """The unicode adjuster escapes `_` (also its own escapes): adjusting twice would differ."""
    names = SchemaNames("my_prefix", UNICODE)
    assert names.of("ks.t.Key") == "my_u005fprefix.ks.t.Key"
    assert SchemaNames("p", AVRO).of("ks.t.my-col.Cell") == "p.ks.t.my_col.Cell"


def test_awkward_column_names_keep_their_json_names_and_get_avro_names() -> None:
    table = make_table(
        partition=[("pk", "int")],
        regular=[(name, "text") for name in AWKWARD] + [("my-set", "set<int>")],
    )
    plan = Translator(EnvelopeSettings("my-prefix")).plan(table)
    assert plan.after_schema.field_names == ("1st", "_u005f", "a.b", "it's", "my-col", "my-set",
                                             "my-set__elements", "naïve", "pk", "sp ace", "x😀", "Ωmega", "中文")
    assert plan.after_schema.field("my-set__elements").schema.name == "my_prefix.ks.t.my_set.Elements"
    avro_fields = [f["name"] for f in avro_schema(plan.after_schema)[1]["fields"]]
    assert avro_fields == ["_1st", "_u005f", "a_b", "it_s", "my_col", "my_set", "my_set__elements",
                           "na_ve", "pk", "sp_ace", "x__", "_mega", "__"]
    unicode_fields = [f["name"] for f in avro_schema(plan.after_schema, UNICODE, UNICODE)[1]["fields"]]
    assert unicode_fields[:4] == ["_u0031st", "_u005fu005f", "a_u002eb", "it_u0027s"]
    assert unicode_fields[-1] == "_u4e2d_u6587"
    # the bytes do not depend on the names: every serializer agrees on a record of this table
    values: dict[str, object] = {"pk": 1, **{name: name for name in AWKWARD}}
    out = Translator(EnvelopeSettings("my-prefix")).translate(record(table, row_with(Operation.INSERT, values)), table)
    Wire().check(out.records[0])


def test_two_fields_with_one_avro_name_are_refused_with_both_names() -> None:
    table = make_table(partition=[("pk", "int")], regular=[("a-b", "int"), ("a_b", "int")])
    plan = Translator(EnvelopeSettings("p")).plan(table)
    with pytest.raises(SerializationError, match=r"fields 'a-b' and 'a_b' of p\.ks\.t\.Before both get the Avro name"):
        avro_schema(plan.value_schema)
    assert [f["name"] for f in avro_schema(plan.after_schema, UNICODE)[1]["fields"]] == ["a_u002db", "a_u005fb", "pk"]


def _avro_settings(**extra: object) -> EnvelopeSettings:
    return EnvelopeSettings(
        "p",
        key_converter=ConverterKind.AVRO,
        value_converter=ConverterKind.AVRO,
        key_converter_schema_registry_url="http://r",
        value_converter_schema_registry_url="http://r",
        **extra,  # type: ignore[arg-type]
    )


class CountingRegistry(InProcessRegistry):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.fail = fail

    def register_avro(self, subject: str, schema_text: str) -> int:
        self.calls.append(subject)
        if self.fail:
            raise ConnectionError("registry down")
        return super().register_avro(subject, schema_text)


def test_schemas_are_registered_when_the_plan_is_built_and_never_in_serialize() -> None:
    registry = CountingRegistry()
    settings = _avro_settings(dropped_changes_topic="p.dropped")
    serializer = build_record_serializer(settings, lambda url: registry)
    translator = Translator(settings, on_new_plan=serializer.prepare)
    table = make_table(partition=[("pk", "int")], clustering=[("ck", "int")], regular=[("v", "int")])
    plan = translator.plan(table)
    assert registry.calls == ["p.ks.t-key", "p.ks.t-value", "p.dropped-key", "p.dropped-value"]
    out = translator.translate(record(table, row_with(Operation.INSERT, {"pk": 1, "ck": 2, "v": 3})), table)
    key, value = serializer.serialize(out.records[0])
    assert key is not None and value is not None and len(registry.calls) == 4  # no registry call
    assert translator.plan(table) is plan and len(registry.calls) == 4
    # a schema no plan registered is refused instead of registered on the way
    other = Translator(settings).plan(make_table(partition=[("pk", "int")], name="other"))
    with pytest.raises(SerializationError, match=r"schema p\.ks\.other\.Key is not registered under p\.ks\.other-key"):
        serializer.key.serialize(other.topic, other.key_schema, {"pk": 1})
    assert len(registry.calls) == 4


def test_an_equal_schema_of_another_plan_object_is_found_registered() -> None:
    registry = CountingRegistry()
    serializer = AvroSerializer(registry, is_key=True)
    table = make_table(partition=[("pk", "int")])
    first, second = (Translator(EnvelopeSettings("p")).plan(table) for _ in range(2))
    assert first.key_schema is not second.key_schema
    schema_id = serializer.register(first.topic, first.key_schema)
    encoded = serializer.serialize(second.topic, second.key_schema, {"pk": 5})
    assert encoded is not None and int.from_bytes(encoded[1:5], "big") == schema_id and len(registry.calls) == 1


def test_a_failed_registration_keeps_no_plan_and_is_tried_again() -> None:
    registry = CountingRegistry(fail=True)
    settings = _avro_settings()
    serializer = build_record_serializer(settings, lambda url: registry)
    translator = Translator(settings, on_new_plan=serializer.prepare)
    table = make_table(partition=[("pk", "int")])
    with pytest.raises(SerializationError, match=r"registering the schema of subject p\.ks\.t-key: registry down"):
        translator.plan(table)
    registry.fail = False
    translator.plan(table)
    assert registry.calls == ["p.ks.t-key", "p.ks.t-key", "p.ks.t-value"]
