"""Randomized: the generated key and row builders (`bridge.envelope.row_code`) give what a plain
reading of the cell rules gives, on random tables and log rows, for deltas and both image kinds,
including values that do not fit (the same column is named); and on every record that does
translate, the generated Avro encoder writes fastavro's bytes and JSON agrees (`Wire.check`)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.envelope.errors import TranslationError, ValueConversionError
from bridge.envelope.plan import TablePlan
from bridge.envelope.row_code import KeyColumnPlan, ValueColumnPlan
from bridge.scylla.model import Operation
from tests.unit.envelope.support import Wire, d, de, make_table, plan_for, row_with, run

EPOCH = datetime.datetime(1970, 1, 1)
BAD = object()  # fits no column type
# CQL type -> strategy of values the driver could return for it (log representation)
TYPES: dict[str, st.SearchStrategy[Any]] = {
    "int": st.integers(-(2**31), 2**31 - 1),
    "bigint": st.integers(-(2**63), 2**63 - 1),
    "text": st.text(max_size=8),
    "double": st.floats(allow_nan=False, width=64),
    "boolean": st.booleans(),
    "uuid": st.uuids(),
    "timestamp": st.integers(-(10**11), 10**11).map(lambda ms: EPOCH + datetime.timedelta(milliseconds=ms)),
    "frozen<list<int>>": st.lists(st.integers(-5, 5), max_size=3),
    "tuple<int, text>": st.tuples(st.integers(-5, 5), st.text(max_size=3)),
    "set<int>": st.frozensets(st.integers(-5, 5), max_size=3),
    "map<text, int>": st.dictionaries(st.text(max_size=3), st.integers(-5, 5), max_size=3),
}
KEY_TYPES = ["int", "bigint", "text", "uuid", "timestamp", "frozen<list<int>>"]
MULTI_CELL = {"set<int>", "map<text, int>"}


@st.composite
def tables(draw: st.DrawFn) -> Any:
    names = draw(st.lists(st.sampled_from("abcdefghijklmnop"), min_size=2, max_size=8, unique=True))
    partition, clustering, static, regular = [], [], [], []
    for index, name in enumerate(names):
        if index == 0:
            partition.append((name, draw(st.sampled_from(KEY_TYPES))))
            continue
        kind = draw(st.sampled_from(["partition", "clustering", "static", "regular", "regular"]))
        if kind in ("partition", "clustering"):
            (partition if kind == "partition" else clustering).append((name, draw(st.sampled_from(KEY_TYPES))))
        else:
            (static if kind == "static" else regular).append((name, draw(st.sampled_from(sorted(TYPES)))))
    if not clustering:
        regular += static  # static columns need a clustering key
        static = []
    return make_table(partition=partition, clustering=clustering, static=static, regular=regular)


def _value(draw: st.DrawFn, cql: str, bad_allowed: bool) -> Any:
    if bad_allowed and draw(st.integers(0, 19)) == 0:
        return BAD
    return draw(TYPES[cql])


@st.composite
def log_values(draw: st.DrawFn, table: Any, bad_allowed: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for column in table.columns:
        cql = column.type.cql()
        if column.is_key:
            values[column.name] = None if draw(st.integers(0, 9)) == 0 else _value(draw, cql, bad_allowed)
            continue
        if draw(st.booleans()):
            values[column.name] = _value(draw, cql, bad_allowed)
        if draw(st.booleans()):
            values[d(column.name)] = True
        if column.type.is_multi_cell and draw(st.booleans()):
            removed = st.integers(-5, 5) if cql == "set<int>" else st.text(max_size=3)
            values[de(column.name)] = draw(st.frozensets(removed, max_size=2))
    return values


def reference_key(plan: TablePlan, values: Mapping[str, Any]) -> dict[str, Any]:
    key = {}
    for column in plan.row_columns:
        if isinstance(column, KeyColumnPlan):
            value = values.get(column.name)
            try:
                key[column.name] = None if value is None else column.convert(value)
            except (ValueConversionError, TypeError, ValueError, AttributeError, KeyError, IndexError) as error:
                raise ValueConversionError(f"column {column.name!r}") from error
    return {name: key[name] for name in plan.key_names}


def reference_row(plan: TablePlan, values: Mapping[str, Any], key: dict[str, Any], kind: str,
                  static_row: bool = False) -> dict[str, Any]:
    """The cell rules read plainly (docs/envelope.md section 1 and 2)."""
    row: dict[str, Any] = {}
    for column in plan.row_columns:
        if isinstance(column, KeyColumnPlan):
            row[column.name] = key[column.name]
            continue
        assert isinstance(column, ValueColumnPlan)
        elements = None
        try:
            if kind != "delta" and column.static != static_row:
                cell = None  # not part of this image
            elif kind == "delta" and column.multi_cell is not None:
                cell, elements = column.delta_cells(values)
            elif values.get(column.name) is not None:
                cell = {"value": column.convert(values[column.name])}
            elif kind == "post" or values.get(column.deleted_column):
                cell = {"value": None}
            else:
                cell = None
        except (ValueConversionError, TypeError, ValueError, AttributeError, KeyError, IndexError) as error:
            raise ValueConversionError(f"column {column.name!r}") from error
        row[column.name] = cell
        if column.elements_field is not None:
            row[column.elements_field] = elements
    return row


def _outcome(build: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", build(*args)
    except ValueConversionError as error:
        return "error", str(error).split(":")[0]  # "column 'x'"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_builders_equal_the_plain_rules(data: st.DataObject) -> None:
    table = data.draw(tables())
    plan = plan_for(table)
    values = data.draw(log_values(table, bad_allowed=True))
    key_outcome = _outcome(plan.key_builder, values)
    assert key_outcome == _outcome(reference_key, plan, values)
    if key_outcome[0] != "ok":
        return
    key = key_outcome[1]
    assert _outcome(plan.delta_builder, values, key) == _outcome(reference_row, plan, values, key, "delta")
    static_row = data.draw(st.booleans())
    for kind, build in (("pre", plan.pre_image_builder), ("post", plan.post_image_builder)):
        assert _outcome(build, values, key, static_row) == _outcome(reference_row, plan, values, key, kind, static_row)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_records_serialize_alike_in_json_avro_and_fastavro(data: st.DataObject) -> None:
    """Every serializer on random translated records: the Avro encoder's bytes are fastavro's."""
    table = data.draw(tables())
    plan = plan_for(table, experimental_preimages_enabled=True, experimental_postimages_enabled=True)
    key_values = {c.name: data.draw(TYPES[c.type.cql()]) for c in table.primary_key}
    rows = []
    for operation in data.draw(st.lists(st.sampled_from([Operation.UPDATE, Operation.INSERT, Operation.PRE_IMAGE,
                                                         Operation.POST_IMAGE, Operation.ROW_DELETE]),
                                        min_size=1, max_size=4)):
        values = data.draw(log_values(table, bad_allowed=False))
        rows.append(row_with(operation, {**values, **key_values}))
    try:
        translation = run(plan, *rows)
    except TranslationError as error:
        pytest.fail(f"valid values refused: {error}")
    wire = Wire()
    for out in translation.records:
        wire.check(out)


def test_a_value_that_does_not_fit_names_its_column_in_each_row_kind() -> None:
    table = make_table(partition=[("pk", "int")], clustering=[("ck", "int")], static=[("s", "int")],
                       regular=[("v", "int"), ("m", "map<text, int>")])
    plan = plan_for(table)
    key = plan.key_builder({"pk": 1, "ck": 2})
    with pytest.raises(ValueConversionError, match=r"^column 'ck': expected int"):
        plan.key_builder({"pk": 1, "ck": "2"})
    with pytest.raises(ValueConversionError, match=r"^column 'v': expected int"):
        plan.delta_builder({"v": "x"}, key)
    with pytest.raises(ValueConversionError, match=r"^column 'm'"):
        plan.delta_builder({"m": 5}, key)
    with pytest.raises(ValueConversionError, match=r"^column 's': expected int"):
        plan.pre_image_builder({"s": "x"}, key, True)
    assert plan.pre_image_builder({"s": "x"}, key, False)["s"] is None  # not part of a clustered row's image
