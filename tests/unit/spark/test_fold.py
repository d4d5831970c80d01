"""The mirror's per-row fold: cell semantics, element changes, deletes, ordering, replay."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.spark.fold import CELL_TS, MARKER, OFFSET, TS_US, FoldSpec, ValueColumn, fold, in_range

SPEC = FoldSpec(
    key_columns=("ck", "pk"),
    value_columns=(
        ValueColumn("m", "map", True),
        ValueColumn("s", "set", True),
        ValueColumn("u", "udt", True),
        ValueColumn("l", "list", True),
        ValueColumn("v", None, False),
    ),
)


def change(op: str, ts: int, offset: int, **cells: Any) -> dict[str, Any]:
    after = {"pk": 1, "ck": 1, "m": None, "s": None, "u": None, "l": None, "v": None}
    after.update(cells)
    return {"op": op, "ts": ts, "rank": 1 if op == "d" else 0, "offset": offset, "after": None if op == "d" else after}


def stored(**values: Any) -> dict[str, Any]:
    row = {"pk": 1, "ck": 1, "m": None, "s": None, "u": None, "l": None, "v": None, MARKER: True, TS_US: 10,
           OFFSET: 1}
    row.update(values)
    row.setdefault(CELL_TS, {name: row[TS_US] for name in ("", "m", "s", "u", "l", "v")})
    return row


def test_untouched_column_keeps_its_value_and_value_null_sets_null() -> None:
    result = fold(SPEC, stored(v=7, s=[1]), [change("u", 20, 2, s={"value": None})])
    assert result.action == "upsert"
    assert result.row is not None
    assert result.row["v"] == 7 and result.row["s"] is None
    assert (result.row[TS_US], result.row[OFFSET]) == (20, 2)


def test_insert_creates_a_row_with_a_marker_that_survives_nulls() -> None:
    result = fold(SPEC, None, [change("c", 20, 2, v={"value": 5}), change("u", 21, 3, v={"value": None})])
    assert result.action == "upsert" and result.row is not None
    assert result.row[MARKER] is True and result.row["v"] is None


def test_update_only_row_disappears_when_its_last_cell_is_nulled() -> None:
    first = fold(SPEC, None, [change("u", 20, 2, v={"value": 5})])
    assert first.action == "upsert" and first.row is not None and first.row[MARKER] is False
    second = fold(SPEC, first.row, [change("u", 21, 3, v={"value": None})])
    assert second.action == "delete"


def test_element_changes_apply_to_the_stored_collections() -> None:
    row = stored(m=[{"key": 1, "value": "a"}, {"key": 2, "value": "b"}], s=[1, 5], u={"a": 1, "b": 2}, l=[10])
    result = fold(SPEC, row, [change(
        "u", 20, 2,
        m__elements={"added": [{"key": 3, "value": "c"}, {"key": 1, "value": "z"}], "removed": [2]},
        s__elements={"added": [3], "removed": [5]},
        u__elements={"added": {"a": 42, "b": None}, "removed": ["b"]},
        l__elements={"added": [{"key": "t1", "value": 11}], "removed": None},
    )])
    assert result.row is not None
    assert result.row["m"] == [{"key": 1, "value": "z"}, {"key": 3, "value": "c"}]
    assert result.row["s"] == [1, 3]
    assert result.row["u"] == {"a": 42, "b": None}
    assert result.row["l"] == [10, 11]


def test_removing_the_last_element_leaves_null_and_overwrite_then_elements_in_order() -> None:
    result = fold(SPEC, stored(s=[1]), [
        change("u", 20, 2, s__elements={"added": None, "removed": [1]}),
        change("u", 21, 3, m={"value": [{"key": 9, "value": "x"}]}),
        change("u", 22, 4, m__elements={"added": [{"key": 8, "value": "y"}], "removed": None}),
    ])
    assert result.row is not None
    assert result.row["s"] is None
    assert result.row["m"] == [{"key": 8, "value": "y"}, {"key": 9, "value": "x"}]


def test_changes_apply_in_timestamp_order_not_arrival_order() -> None:
    result = fold(SPEC, None, [change("u", 30, 3, v={"value": 2}), change("c", 20, 2, v={"value": 1})])
    assert result.row is not None and result.row["v"] == 2


def test_a_delete_wins_over_a_write_with_the_same_timestamp() -> None:
    result = fold(SPEC, stored(v=1), [change("d", 20, 2), change("c", 20, 3, v={"value": 5})])
    assert result.action == "delete"


def test_delete_then_reinsert_starts_from_an_empty_row() -> None:
    result = fold(SPEC, stored(v=1, s=[4]), [change("d", 20, 2), change("u", 21, 3, s={"value": [9]})])
    assert result.row is not None and result.row["v"] is None and result.row["s"] == [9]
    assert result.row[MARKER] is False


def test_replayed_changes_are_skipped() -> None:
    events = [change("c", 20, 2, v={"value": 1}), change("u", 21, 3, l__elements={"added": [{"key": "k",
                                                                                        "value": 1}]})]
    first = fold(SPEC, None, events)
    assert first.row is not None
    again = fold(SPEC, first.row, events)
    assert again.action == "none"


def test_nothing_to_delete_gives_no_action() -> None:
    assert fold(SPEC, None, [change("c", 20, 2, v={"value": 1}), change("d", 21, 3)]).action == "none"


def test_list_removals_by_key_are_counted_not_guessed() -> None:
    result = fold(SPEC, stored(l=[1, 2]), [change("u", 20, 2, l__elements={"added": None, "removed": ["k1"]})])
    assert result.row is not None and result.row["l"] == [1, 2] and result.unapplied_list_removals == 1


def dropped(kind: str, ts: int, start: dict[str, Any] | None = None, end: dict[str, Any] | None = None,
            start_inclusive: bool = True, end_inclusive: bool = True) -> dict[str, Any]:
    return {"kind": kind, "ts": ts, "rank": 1, "offset": 0, "key": {"ck": None, "pk": 1}, "start": start,
            "start_inclusive": start_inclusive, "end": end, "end_inclusive": end_inclusive}


@pytest.mark.parametrize(("ck", "covered"), [(3, False), (4, True), (7, True), (8, False)])
def test_range_delete_bounds(ck: int, covered: bool) -> None:
    event = dropped("range_delete", 20, {"ck": 3}, {"ck": 8}, start_inclusive=False, end_inclusive=False)
    assert in_range(SPEC, stored(ck=ck), event) is covered


def test_range_delete_open_end_and_other_partition() -> None:
    event = dropped("range_delete", 20, {"ck": 3}, {"ck": None}, start_inclusive=False)
    assert in_range(SPEC, stored(ck=100), event)
    assert not in_range(SPEC, stored(ck=100, pk=2), event)


def test_range_delete_removes_older_rows_only() -> None:
    event = dropped("range_delete", 20, {"ck": 0}, {"ck": None})
    assert fold(SPEC, stored(ck=5), [event]).action == "delete"
    assert fold(SPEC, stored(ck=5, **{TS_US: 25}), [event]).action == "none"


def test_a_late_range_delete_removes_only_the_cells_older_than_it() -> None:
    """The dropped-changes topic lags: the delete at 20 arrives after the row's write at 25."""
    row = stored(ck=5, v=1, s=[2], **{TS_US: 25, CELL_TS: {"": 10, "v": 10, "s": 25}})
    result = fold(SPEC, row, [dropped("range_delete", 20, {"ck": 0}, {"ck": None})])
    assert result.action == "upsert" and result.row is not None
    assert result.row["v"] is None and result.row["s"] == [2] and result.row[MARKER] is False
    again = fold(SPEC, result.row, [dropped("range_delete", 20, {"ck": 0}, {"ck": None})])
    assert again.action == "none"


def test_older_writes_arriving_after_a_stored_range_delete_stay_deleted() -> None:
    """The data topic lags: the stored delete at 30 is folded with the late writes at 20 and 25."""
    late = [change("c", 20, 4, v={"value": 1}), change("u", 25, 5, s={"value": [3]})]
    result = fold(SPEC, None, [*late, dropped("partition_delete", 30)])
    assert result.action == "none"
    newer = fold(SPEC, None, [change("u", 35, 6, v={"value": 2}), dropped("partition_delete", 30)])
    assert newer.row is not None and newer.row["v"] == 2


def test_partition_delete_then_write_in_the_same_batch() -> None:
    result = fold(SPEC, stored(v=3), [dropped("partition_delete", 20), change("u", 21, 5, s={"value": [1]})])
    assert result.action == "upsert" and result.row is not None
    assert result.row["v"] is None and result.row["s"] == [1]


def test_multi_column_clustering_prefix_bounds() -> None:
    spec = FoldSpec(("a", "b", "pk"), (ValueColumn("v", None, False),))
    event = {"kind": "range_delete", "ts": 5, "rank": 1, "offset": 0, "key": {"a": None, "b": None, "pk": 1},
             "start": {"a": 1, "b": 5}, "start_inclusive": False, "end": {"a": 1, "b": None}, "end_inclusive": True}
    row = {"pk": 1, "a": 1, "b": 6, "v": 1, MARKER: True, TS_US: 1, OFFSET: 0}
    assert in_range(spec, row, event)
    assert not in_range(spec, {**row, "b": 5}, event)
    assert not in_range(spec, {**row, "a": 2}, event)
