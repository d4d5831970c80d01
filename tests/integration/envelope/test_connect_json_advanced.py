"""Kafka Connect's own JsonConverter accepts the advanced format's JSON-with-schemas messages and
writes them back byte for byte, with schemas.enable true and false (the approach and the Java
checker of test_connect_json_compat): every CQL type as a plain value in images, the payload key
field, only-updated structs, deletes."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.records import KafkaRecord
from bridge.scylla.model import Operation
from tests.integration.envelope.test_connect_json_compat import (  # noqa: F401 (java_classpath: a fixture)
    ALL_TYPES,
    EVERYTHING,
    KEY,
    connect_round_trip,
    java_classpath,
)
from tests.unit.envelope.advanced_support import ALL_PLACEMENTS, advanced_plan, run_advanced
from tests.unit.envelope.support import d, row, row_with

pytestmark = pytest.mark.slow

IMAGE = {k: v for k, v in EVERYTHING.items() if not k.startswith("cdc$")}


def sample_records() -> list[KafkaRecord]:
    full = advanced_plan(ALL_TYPES, "full", "full", ALL_PLACEMENTS)
    only = advanced_plan(ALL_TYPES, "only-updated", "only-updated", "kafka-key,payload-key")
    out: list[KafkaRecord] = []
    out += run_advanced(full, row_with(Operation.INSERT, EVERYTHING), row_with(Operation.POST_IMAGE, IMAGE)).records
    for plan in (full, only):
        out += run_advanced(
            plan,
            row_with(Operation.PRE_IMAGE, {**KEY, "c_int": 1, "c_text": "old"}),
            row_with(Operation.UPDATE, {**KEY, "c_int": 2, d("c_text"): True}),
            row_with(Operation.POST_IMAGE, {**IMAGE, "c_int": 2, "c_text": None}),
        ).records
    out += run_advanced(full, row_with(Operation.PRE_IMAGE, IMAGE), row(Operation.ROW_DELETE, **KEY)).records
    out += run_advanced(advanced_plan(ALL_TYPES), row(Operation.UPDATE, **KEY, c_int=3)).records
    return out


def test_connect_accepts_and_rewrites_advanced_json_byte_for_byte(java_classpath: str) -> None:  # noqa: F811
    with_schemas, without_schemas = JsonSerializer(True), JsonSerializer(False)
    expected: list[tuple[bytes, bytes]] = []
    for record in sample_records():
        sides: list[tuple[Any, Any]] = [(record.key_schema, record.key), (record.value_schema, record.value)]
        for schema, value in sides:
            if value is None:
                continue
            on = with_schemas.serialize(record.topic, schema, value)
            off = without_schemas.serialize(record.topic, schema, value)
            assert on is not None and off is not None
            expected.append((on, off))
    assert len(expected) == 11  # 5 records with key and value, 1 tombstone with a key only
    answers = connect_round_trip(java_classpath, [on for on, _ in expected])
    assert len(answers) == len(expected)
    for (on, off), answer in zip(expected, answers, strict=True):
        assert answer.startswith("OK "), answer
        _, connect_on, connect_off = answer.split(" ")
        assert base64.b64decode(connect_on) == on
        assert base64.b64decode(connect_off) == off
