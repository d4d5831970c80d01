"""The compaction's key filter (`bridge.spark.mirror.keys`): the touched keys' values per column,
or their ranges, and the union of kinds of touched keys."""

from __future__ import annotations

from bridge.spark.mirror.keys import Bound, bounds_of_keys, bounds_of_ranges


def test_each_column_keeps_its_distinct_values_and_notes_nulls() -> None:
    """Values are distinct per column, in first-seen order; a null (a static row's clustering
    column) is not a value but marks the column as having nulls."""
    keys = [(3, "a"), (1, None), (3, "b"), (1, "a")]
    assert bounds_of_keys(["pk", "ck"], keys) == [Bound("pk", (3, 1), None, None, False),
                                                  Bound("ck", ("a", "b"), None, None, True)]


def test_no_keys_give_empty_value_lists() -> None:
    """No touched key (only deletes pending): each column has no value, so its filter keeps no row."""
    assert bounds_of_keys(["pk"], []) == [Bound("pk", (), None, None, False)]


def test_ranges_become_bounds_without_values() -> None:
    """Many keys: each column is bounded by its range; an all-null column has no range."""
    assert bounds_of_ranges({"pk": (1, 9, False), "ck": (None, None, True)}) == [
        Bound("pk", None, 1, 9, False), Bound("ck", None, None, None, True)]
