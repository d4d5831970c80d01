"""Golden tests of `cdc.include.before` / `cdc.include.after` in the advanced format, on a
reduction of the table of `CdcIncludeBeforeAfterBase` (74d336e; v2.0.0 the same for these
cases): `id int PRIMARY KEY` with active and untouched columns of primitive, non-frozen
collection and UDT types, `'preimage': true` (the pre-image holds the key and the columns the
write changed) and `'postimage': true` (the whole row after it)."""

from __future__ import annotations

import datetime
import uuid
from collections import namedtuple
from typing import Any

import pytest
from cassandra.util import SortedSet

from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import LogRow
from bridge.scylla.model import Operation as Op
from bridge.scylla.schema import scalar, udt
from tests.unit.envelope.advanced_support import advanced_plan, data, events, run_advanced
from tests.unit.envelope.support import d, de, make_table, row_with

SIMPLE = udt("simple_udt", [("a", scalar("int")), ("b", scalar("text"))])
Simple = namedtuple("Simple", "a b")
TABLE = make_table(
    [("id", "int")],
    regular=[("int_col", "int"), ("text_col", "text"), ("date_col", "date"), ("double_col", "double"),
             ("list_col", "list<int>"), ("set_col", "set<text>"), ("map_col", "map<int, text>"),
             ("nf_udt", "simple_udt"), ("frozen_udt", "frozen<simple_udt>"),
             ("untouched_text", "text"), ("untouched_list", "list<int>")],
    udts={"simple_udt": SIMPLE},
)
K1, K2, K3 = (timeuuid_for(1_718_022_896_000_000 + i, low=0x8000000000000001) for i in range(3))
# Set 1: what the insert writes (the log shows a non-frozen list as map<timeuuid, int>).
SET1: dict[str, Any] = {
    "id": 1, "int_col": 42, "text_col": "text1", "date_col": datetime.date(2024, 6, 10), "double_col": 3.5,
    "list_col": {K2: 20, K1: 10}, "set_col": SortedSet(["x", "y"]), "map_col": {1: "one"},
    "nf_udt": Simple(7, "seven"), "frozen_udt": Simple(None, None), "untouched_text": "untouched",
    "untouched_list": {K3: 999},
}
SET1_JSON: dict[str, Any] = {
    "int_col": 42, "text_col": "text1", "date_col": 19884, "double_col": 3.5, "list_col": [10, 20],
    "set_col": ["x", "y"], "map_col": [{"key": 1, "value": "one"}], "nf_udt": {"a": 7, "b": "seven"},
    "frozen_udt": None,  # a UDT whose fields are all null is null
    "untouched_text": "untouched", "untouched_list": [999],
}
NOTHING = dict.fromkeys(SET1_JSON)
# The update of some primitives (CdcIncludeBeforeAfterBase.updateSomePrimitives): int_col and
# text_col; the pre-image holds their old values, the post-image the whole new row.
UPDATE_DELTA = {"id": 1, "int_col": 43, "text_col": "text2"}
PRE = {"id": 1, "int_col": 42, "text_col": "text1"}
POST = {**SET1, "int_col": 43, "text_col": "text2"}
POST_JSON = {**SET1_JSON, "int_col": 43, "text_col": "text2"}


def insert_rows() -> tuple[LogRow, ...]:
    delta = {**SET1, "list_col": {K2: 20, K1: 10}, d("list_col"): True, d("set_col"): True, d("map_col"): True,
             d("nf_udt"): True, d("untouched_list"): True}
    return row_with(Op.INSERT, delta), row_with(Op.POST_IMAGE, SET1)


def update_rows() -> tuple[LogRow, ...]:
    return row_with(Op.PRE_IMAGE, PRE), row_with(Op.UPDATE, UPDATE_DELTA), row_with(Op.POST_IMAGE, POST)


MODES = ["none", "full", "only-updated"]


@pytest.mark.parametrize("before", MODES)
@pytest.mark.parametrize("after", MODES)
def test_insert(before: str, after: str) -> None:
    """CdcIncludeBeforeAfter{None,Full,OnlyUpdated}IT, CdcIncludeBefore{Full,OnlyUpdated}After*IT
    testInsert: `before` null (no pre-image of a new row); `after` the whole post-image under
    `full` and `only-updated` alike (buildInsertRecord), null under `none` — `after` never comes
    from the delta row (CdcIncludeBeforeAfterNoneIT)."""
    [event] = events(advanced_plan(TABLE, before, after), *insert_rows())
    expected_after = None if after == "none" else {"id": 1, **SET1_JSON}
    assert data(event)["before"] is None and data(event)["after"] == expected_after
    assert event["key"] == {"id": 1} and data(event)["op"] == "c"


@pytest.mark.parametrize(("before", "after", "expected_before", "expected_after"), [
    # CdcIncludeBeforeAfterNoneIT.expectedUpdate: both null
    ("none", "none", None, None),
    # CdcIncludeBeforeAfterFullIT: before = the whole row before (modified columns from the
    # pre-image, the others from the post-image: fillBeforeStructForUpdate), after = post-image
    ("full", "full", {"id": 1, **SET1_JSON}, {"id": 1, **POST_JSON}),
    # CdcIncludeBeforeAfterOnlyUpdatedIT: only the modified columns carry values (+ key)
    ("only-updated", "only-updated", {**NOTHING, "id": 1, "int_col": 42, "text_col": "text1"},
     {**NOTHING, "id": 1, "int_col": 43, "text_col": "text2"}),
    # CdcIncludeBeforeFullAfterOnlyUpdatedIT
    ("full", "only-updated", {"id": 1, **SET1_JSON}, {**NOTHING, "id": 1, "int_col": 43, "text_col": "text2"}),
    # CdcIncludeBeforeOnlyUpdatedAfterFullIT
    ("only-updated", "full", {**NOTHING, "id": 1, "int_col": 42, "text_col": "text1"}, {"id": 1, **POST_JSON}),
    # no IT: before=full alone uses the pre-image as it is (connector.md 2.7, inference), which
    # with 'preimage': true holds only the modified columns
    ("full", "none", {**NOTHING, "id": 1, "int_col": 42, "text_col": "text1"}, None),
    # no IT: with before=none the pre-image is not used, after alone
    ("none", "full", None, {"id": 1, **POST_JSON}),
])
def test_update_of_some_columns(before: str, after: str, expected_before: Any, expected_after: Any) -> None:
    """testUpdateSingleColumn of the CdcIncludeBeforeAfter*IT family (buildUpdateRecord)."""
    translation = run_advanced(advanced_plan(TABLE, before, after), *update_rows())
    assert dict(translation.missing_images) == {}
    [event] = events(advanced_plan(TABLE, before, after), *update_rows())
    assert data(event)["op"] == "u"
    assert data(event)["before"] == expected_before
    assert data(event)["after"] == expected_after


@pytest.mark.parametrize("mode", MODES)
def test_partition_delete_has_no_before(mode: str) -> None:
    """buildDeleteRecord: a delete of a partition-key-only table is a PARTITION_DELETE, which has
    no pre-image before Scylla 2026.1: before and after null in every mode, then a tombstone;
    not counted as a missing image (the connector does not wait for it there either)."""
    plan = advanced_plan(TABLE, mode, mode)
    translation = run_advanced(plan, row_with(Op.PARTITION_DELETE, {"id": 1}))
    assert dict(translation.missing_images) == {}
    event, tombstone = events(plan, row_with(Op.PARTITION_DELETE, {"id": 1}))
    assert data(event)["before"] is None and data(event)["after"] is None and data(event)["op"] == "d"
    assert tombstone["key"] == {"id": 1} and tombstone["value"] is None


@pytest.mark.parametrize("mode", ["full", "only-updated"])
def test_row_delete_with_pre_image(mode: str) -> None:
    """buildTtlDeleteRecord (testTtlDelete; CdcPerRowTtlDeleteIT): a ROW_DELETE with its
    pre-image has `before` = the whole pre-image whatever the mode (emitDeleteRecord always
    fills the full image), `after` null, then a tombstone. A partition delete that does carry
    a pre-image (Scylla >= 2026.1) uses it the same way."""
    plan = advanced_plan(TABLE, mode, mode)
    for op in (Op.ROW_DELETE, Op.SERVICE_ROW_DELETE, Op.PARTITION_DELETE):
        event, tombstone = events(plan, row_with(Op.PRE_IMAGE, SET1), row_with(op, {"id": 1}))
        assert data(event)["before"] == {"id": 1, **SET1_JSON} and data(event)["after"] is None
        assert tombstone["value"] is None


def test_column_delete() -> None:
    """A column set to null is an update with `cdc$deleted_<col>` (connector.md 2.8): the column
    counts as modified (getModifiedColumns). only-updated: `before` has its old value, `after`
    null for it (a null value is left out by fillStructWithOnlyUpdatedColumns)."""
    plan = advanced_plan(TABLE, "only-updated", "only-updated")
    rows = (row_with(Op.PRE_IMAGE, {"id": 1, "text_col": "text1"}),
            row_with(Op.UPDATE, {"id": 1, d("text_col"): True}),
            row_with(Op.POST_IMAGE, {**SET1, "text_col": None}))
    [event] = events(plan, *rows)
    assert data(event)["before"] == {**NOTHING, "id": 1, "text_col": "text1"}
    assert data(event)["after"] == {**NOTHING, "id": 1}
    [full] = events(advanced_plan(TABLE, "full", "full"), *rows)
    assert data(full)["before"] == {"id": 1, **SET1_JSON}
    assert data(full)["after"] == {"id": 1, **SET1_JSON, "text_col": None}


def test_collection_element_changes_are_modified_columns() -> None:
    """getModifiedColumns: a non-frozen collection with added elements (delta value) or removed
    ones (`cdc$deleted_elements_<col>`) is modified; images carry the whole collection, a list
    in the order of its timeuuid keys, an emptied collection as null (connector.md 2.5)."""
    plan = advanced_plan(TABLE, "only-updated", "only-updated")
    new_key = uuid.UUID(int=K3.int)
    rows = (row_with(Op.PRE_IMAGE, {"id": 1, "list_col": {K2: 20, K1: 10}, "set_col": SortedSet(["x", "y"]),
                                    "map_col": {1: "one"}}),
            row_with(Op.UPDATE, {"id": 1, "list_col": {new_key: 30}, de("set_col"): SortedSet(["x"]),
                                 de("map_col"): SortedSet([1])}),
            row_with(Op.POST_IMAGE, {**SET1, "list_col": {K1: 10, K2: 20, new_key: 30}, "set_col": SortedSet(["y"]),
                                     "map_col": SortedSet()}))
    [event] = events(plan, *rows)
    assert data(event)["before"] == {**NOTHING, "id": 1, "list_col": [10, 20], "set_col": ["x", "y"],
                                     "map_col": [{"key": 1, "value": "one"}]}
    assert data(event)["after"] == {**NOTHING, "id": 1, "list_col": [10, 20, 30], "set_col": ["y"]}


def test_udt_changes() -> None:
    """ScyllaTypesAll* / CdcIncludeBeforeAfterBase UDT columns: a non-frozen UDT field change is
    modified (delta value); images hold the whole UDT; one whose fields are all null is null."""
    plan = advanced_plan(TABLE, "full", "full")
    rows = (row_with(Op.PRE_IMAGE, {"id": 1, "nf_udt": Simple(7, "seven")}),
            row_with(Op.UPDATE, {"id": 1, "nf_udt": Simple(None, "eight"), de("nf_udt"): SortedSet([0])}),
            row_with(Op.POST_IMAGE, {**SET1, "nf_udt": Simple(None, "eight")}))
    [event] = events(plan, *rows)
    assert data(event)["before"]["nf_udt"] == {"a": 7, "b": "seven"}
    assert data(event)["after"]["nf_udt"] == {"a": None, "b": "eight"}
    assert data(event)["after"]["frozen_udt"] is None


def test_missing_images_are_null_and_counted() -> None:
    """The connector waits for an image its mode needs and drops the change after
    cdc.incomplete.task.timeout.ms (ScyllaChangesConsumer.cleanupStaleTasks). A record is whole
    here, so the change goes out with that image null and the lack is counted."""
    plan = advanced_plan(TABLE, "full", "full")
    translation = run_advanced(plan, row_with(Op.UPDATE, UPDATE_DELTA))  # e.g. an update of a row that did not exist
    assert dict(translation.missing_images) == {"before": 1, "after": 1}
    [event] = events(plan, row_with(Op.UPDATE, UPDATE_DELTA))
    assert data(event)["before"] is None and data(event)["after"] is None and data(event)["op"] == "u"
    assert dict(run_advanced(plan, row_with(Op.INSERT, {"id": 2})).missing_images) == {"after": 1}
    assert dict(run_advanced(plan, row_with(Op.ROW_DELETE, {"id": 2})).missing_images) == {"before": 1}
    assert dict(run_advanced(plan, *update_rows()[1:]).missing_images) == {"before": 1}
    none = advanced_plan(TABLE)
    assert dict(run_advanced(none, row_with(Op.UPDATE, UPDATE_DELTA)).missing_images) == {}
