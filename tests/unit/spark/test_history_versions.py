"""The history's per-key versions (SCD type 2): one version per timestamp at which the row's state
changes, late changes rewriting the later versions, deletes ending them, untracked columns
updated in place, replays changing nothing; checked against the reference fold at every instant."""

from __future__ import annotations

import itertools
import random
from typing import Any

from bridge.spark.fold import FoldSpec, ValueColumn, fold
from bridge.spark.history_versions import DROPPED_OP, as_of, versions

SPEC = FoldSpec(("pk", "ck"), (ValueColumn("v", None, False), ValueColumn("t", None, False),
                               ValueColumn("s", "set", True)))
KEY = {"pk": 1, "ck": 2}


def write(op: str, ts: int, offset: int, **cells: Any) -> dict[str, Any]:
    after = {**KEY, **{name: ({"value": v} if name != "s__elements" else v) for name, v in cells.items()}}
    return {"op": op, "ts": ts, "offset": offset, "after": None if op == "d" else after}


def covering(ts: int, offset: int) -> dict[str, Any]:
    return {"kind": "partition_delete", "key": {}, "ts": ts, "offset": offset}


def row(v: Any = None, t: Any = None, s: Any = None) -> dict[str, Any]:
    return {**KEY, "v": v, "t": t, "s": s}


def spans(events: list[dict[str, Any]], tracked: frozenset[str] | None = None) -> list[tuple[Any, ...]]:
    return [(x.start_us, x.end_us, x.op, x.row) for x in versions(SPEC, events, tracked)]


def test_one_version_per_timestamp_of_change_and_a_delete_ends_it() -> None:
    events = [write("c", 10, 1, v=1, t="a"), write("u", 20, 2, v=2), write("u", 20, 3, t="b"), write("d", 30, 4),
              write("c", 40, 5, v=9)]
    assert spans(events) == [(10, 20, "c", row(1, "a")), (20, 30, "u", row(2, "b")), (40, None, "c", row(9))]


def test_a_late_change_rewrites_the_versions_after_it_that_it_affects() -> None:
    early = [write("c", 10, 1, v=1, t="a"), write("u", 30, 2, v=3)]
    late = write("u", 20, 3, t="x")  # older than the v=3 write, arrives after it
    assert spans([*early, late]) == [(10, 20, "c", row(1, "a")), (20, 30, "u", row(1, "x")),
                                     (30, None, "u", row(3, "x"))]
    older_than_applied = write("u", 25, 4, v=2)  # v=2 at 25 is overwritten by v=3 at 30 afterwards
    assert spans([*early, late, older_than_applied])[2:] == [(25, 30, "u", row(2, "x")),
                                                             (30, None, "u", row(3, "x"))]


def test_a_range_delete_ends_the_version_or_shadows_only_the_older_cells() -> None:
    events = [write("c", 10, 1, v=1), write("u", 30, 2, t="new")]
    assert spans([*events, covering(20, 9)]) == [(10, 20, "c", row(1)), (30, None, "u", row(t="new"))]
    assert spans([write("c", 10, 1, v=1), write("u", 30, 2, t="new"), covering(35, 9)])[-1] == \
        (30, 35, "u", row(1, "new"))
    shadowed = [write("u", 10, 1, v=1), write("u", 30, 2, t="new"), covering(20, 9), write("u", 5, 3, t="old")]
    assert spans(shadowed) == [(5, 10, "u", row(t="old")), (10, 20, "u", row(1, "old")), (30, None, "u", row(t="new"))]
    partial = [write("u", 10, 1, v=1), write("u", 30, 2, t="new"), covering(20, 9)]
    assert spans([*partial, write("u", 25, 3, v=5)])[1:] == [(25, 30, "u", row(5)), (30, None, "u", row(5, "new"))]
    cut = [write("c", 10, 1, v=1), write("u", 30, 2, t="new"), covering(35, 9), write("u", 32, 3, v=4)]
    assert spans(cut)[-1] == (32, 35, "u", row(4, "new"))
    only_newer = [write("u", 40, 1, v=1), write("u", 10, 2, t="a"), covering(20, 9)]
    assert spans(only_newer) == [(10, 20, "u", row(t="a")), (40, None, "u", row(1))]
    assert DROPPED_OP == "range"
    mixed = [write("u", 10, 1, v=1), write("u", 30, 2, t="b"), covering(35, 9),
             write("u", 36, 3, s__elements={"added": [1]})]
    assert spans(mixed)[-1] == (36, None, "u", row(s=[1]))
    keep_new = [write("u", 10, 1, v=1), write("u", 40, 2, t="b"), covering(20, 9)]
    assert [x.op for x in versions(SPEC, [*keep_new, write("u", 15, 3, s__elements={"added": [2]})])] == ["u", "u", "u"]


def test_a_covering_delete_at_a_writes_timestamp_wins_and_a_newer_cell_survives() -> None:
    assert versions(SPEC, [write("u", 10, 1, v=1), write("u", 10, 2, t="b"), covering(10, 3)]) == []
    newer = versions(SPEC, [write("u", 10, 1, v=1), write("u", 12, 2, t="b"), covering(11, 3)])
    assert [(x.start_us, x.end_us, x.op, x.row) for x in newer] == [(10, 11, "u", row(1)), (12, None, "u", row(t="b"))]
    bounded = {"kind": "range_delete", "key": {}, "ts": 20, "offset": 9}  # no bounds: covers the row
    assert [x.end_us for x in versions(SPEC, [write("u", 10, 1, v=1), bounded])] == [20]


def test_untracked_columns_update_the_open_version_in_place() -> None:
    events = [write("c", 10, 1, v=1, t="a"), write("u", 20, 2, t="b"), write("u", 30, 3, v=2)]
    assert spans(events, frozenset({"v"})) == [(10, 30, "c", row(1, "b")), (30, None, "u", row(2, "b"))]
    assert spans(events, frozenset({"v", "t"})) == spans(events)


def test_a_snapshot_row_starts_a_version_and_a_write_it_holds_is_not_applied_twice() -> None:
    events = [{"op": "r", "ts": 50, "offset": 7, "after": {**KEY, "v": {"value": 1}, "s": {"value": [1, 2]}}},
              write("u", 50, 3, s__elements={"added": [2]}), write("u", 60, 8, s__elements={"added": [3]})]
    assert spans(events) == [(50, 60, "r", row(1, s=[1, 2])), (60, None, "u", row(1, s=[1, 2, 3]))]


def test_replayed_or_duplicated_changes_change_nothing() -> None:
    events = [write("c", 10, 1, v=1), write("u", 20, 2, s__elements={"added": [4]}), write("d", 30, 3)]
    assert versions(SPEC, events + events) == versions(SPEC, events)


def test_every_instant_equals_the_reference_fold_of_the_changes_up_to_it() -> None:
    rng = random.Random(3)
    for _ in range(200):
        events: list[dict[str, Any]] = []
        for offset in range(rng.randrange(1, 12)):
            ts = rng.randrange(1, 15) * 10
            kind = rng.choice(["c", "u", "u", "set", "d", "drop", "r"])
            if kind == "drop":
                events.append(covering(ts, offset))
            elif kind == "set":
                events.append(write("u", ts, offset, s__elements__elements={"added": [rng.randrange(4)],
                                                                  "removed": [rng.randrange(4)]}))
            elif kind == "r":
                events.append({"op": "r", "ts": ts, "offset": offset,
                               "after": {**KEY, "v": {"value": rng.randrange(3)}, "t": {"value": None},
                                         "s": {"value": [rng.randrange(4)]}}})
            else:
                events.append(write(kind, ts, offset, **{rng.choice("vt"): rng.randrange(3)}))
        history = versions(SPEC, events)
        for t in range(0, 160, 5):
            folded = fold(SPEC, None, [e for e in events if e["ts"] <= t])
            want = None if folded.row is None else {n: folded.row[n] for n in ("pk", "ck", "v", "t", "s")}
            got = as_of(history, t)
            assert (got.row if got else None) == want, (t, events)
        starts = [x.start_us for x in history]
        assert starts == sorted(set(starts)), "one version per timestamp, in order"
        assert all(a.end_us is not None and a.end_us <= b.start_us for a, b in itertools.pairwise(history))


def test_the_static_row_has_no_marker_so_nulling_its_last_cell_ends_its_version() -> None:
    """The static row (clustering columns null) never gets a row marker, even from an INSERT:
    nulling its last cell ends its version, where a regular row inserted keeps one."""
    static = {"pk": 1, "ck": None}
    events = [{"op": "c", "ts": 10, "offset": 1, "after": {**static, "v": {"value": 5}}},
              {"op": "u", "ts": 20, "offset": 2, "after": {**static, "v": {"value": None}}}]
    assert [(x.start_us, x.end_us, x.op, x.row) for x in versions(SPEC, events)] == [
        (10, 20, "c", {**static, "v": 5, "t": None, "s": None})]
    regular = [write("c", 10, 1, v=5), write("u", 20, 2, v=None)]
    assert spans(regular) == [(10, 20, "c", row(5)), (20, None, "u", row())]
