"""The history's per-key versions (SCD type 2): one version per timestamp at which the row's state
changes, late changes rewriting the later versions, deletes ending them, untracked columns
updated in place, replays changing nothing; checked against the reference fold at every instant."""

from __future__ import annotations

import itertools
import random
from typing import Any

from bridge.spark.fold.reference import FoldSpec, ValueColumn, fold
from bridge.spark.history.versions import DROPPED_OP, Stored, Version, advance, as_of, versions

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


def stored_of(events: list[dict[str, Any]]) -> Stored:
    data = [e for e in events if "kind" not in e]
    inserts = [e["ts"] for e in data if e["op"] in ("c", "r")]
    deletes = [e["ts"] for e in data if e["op"] == "d"]
    return Stored(max(e["ts"] for e in data), max(inserts, default=None), max(deletes, default=None))


def advanced(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[Version] | None:
    """The versions `advance` gives from the changes `before` (stored) and `after` (the micro-batch),
    the stored versions ended before the open one kept."""
    stored = versions(SPEC, before)
    current = stored[-1] if stored and stored[-1].end_us is None else None
    covering_ = [(e, False) for e in before if "kind" in e] + [(e, True) for e in after if "kind" in e]
    more = advance(SPEC, current, stored_of(before), [e for e in after if "kind" not in e], covering_)
    return None if more is None else [*stored[:-1 if current else None], *more]


def test_in_order_changes_continue_from_the_open_version() -> None:
    before = [write("c", 10, 1, v=1, t="a"), write("u", 20, 2, v=2)]
    assert advanced(before, [write("u", 30, 3, t="b"), write("u", 30, 4, v=3)]) == \
        versions(SPEC, [*before, write("u", 30, 3, t="b"), write("u", 30, 4, v=3)])
    same = advance(SPEC, versions(SPEC, before)[-1], stored_of(before), [write("u", 25, 5, v=2)], [])
    assert same == [versions(SPEC, before)[-1]], "a change that changes nothing: the open version as it was"


def test_a_late_or_equal_timestamp_change_or_delete_asks_for_the_full_recompute() -> None:
    before = [write("c", 10, 1, v=1), write("u", 20, 2, v=2)]
    assert advanced(before, [write("u", 15, 3, t="x")]) is None
    assert advanced(before, [write("u", 20, 3, t="x")]) is None, "the same timestamp as a stored change"
    assert advanced(before, [covering(20, 3)]) is None
    assert advanced(before, [write("u", 30, 3, t="x"), covering(5, 4)]) is None
    assert advanced([*before, covering(5, 4)], [write("u", 30, 3, t="x")]) == \
        versions(SPEC, [*before, covering(5, 4), write("u", 30, 3, t="x")]), "a stored older delete: applied already"


def test_deletes_end_the_open_version_and_the_marker_keeps_a_row_inserted() -> None:
    inserted = [write("c", 10, 1, v=1)]
    assert advanced(inserted, [write("u", 20, 2, v=None)]) == [Version(10, 20, "c", 1, row(1)),
                                                                Version(20, None, "u", 2, row())]
    updated = [write("u", 10, 1, v=1)]
    assert advanced(updated, [write("u", 20, 2, v=None)]) == [Version(10, 20, "u", 1, row(1))]
    reinserted_then_deleted = [write("c", 10, 1, v=1), write("d", 20, 2), write("u", 30, 3, v=2)]
    assert advanced(reinserted_then_deleted, [write("u", 40, 4, v=None)])[-1].end_us == 40  # type: ignore[index]
    assert advanced(inserted, [covering(20, 2), write("u", 15 + 10, 3, t="b")]) == \
        versions(SPEC, [*inserted, covering(20, 2), write("u", 25, 3, t="b")])
    assert advanced(inserted, [write("d", 20, 2), write("c", 30, 3, t="n")]) == \
        versions(SPEC, [*inserted, write("d", 20, 2), write("c", 30, 3, t="n")])
    ended = [write("c", 10, 1, v=1), covering(50, 2)]  # a stored delete newer than every stored change
    assert advanced(ended, [write("u", 30, 3, t="b")]) is None, "the row had v=1 at 30: read back"
    assert advanced(ended, [write("u", 60, 3, t="b")]) == versions(SPEC, [*ended, write("u", 60, 3, t="b")])
    assert advanced(ended, [write("u", 60, 3, t="b")]) == [Version(10, 50, "c", 1, row(1)),
                                                            Version(60, None, "u", 3, row(t="b"))]


def test_a_new_key_advances_from_nothing_with_every_covering_delete() -> None:
    events = [write("c", 10, 1, v=1), write("u", 30, 3, t="b")]
    covering_ = [(covering(20, 2), False), (covering(40, 4), True)]
    assert advance(SPEC, None, None, events, covering_) == \
        versions(SPEC, [*events, covering(20, 2), covering(40, 4)])
    assert advance(SPEC, Version(5, None, "c", 0, row(1)), None, events, []) is None, "an open version, nothing stored"


def test_advancing_equals_the_full_recompute_whenever_it_answers() -> None:
    rng = random.Random(7)
    answered = refused = 0
    for _ in range(2000):
        events: list[dict[str, Any]] = []
        for offset in range(rng.randrange(2, 12)):
            ts = rng.randrange(1, 15) * 10
            kind = rng.choice(["c", "u", "u", "set", "d", "drop", "r", "null"])
            if kind == "drop":
                events.append(covering(ts, offset))
            elif kind == "set":
                events.append(write("u", ts, offset, s__elements={"added": [rng.randrange(4)],
                                                                   "removed": [rng.randrange(4)]}))
            elif kind == "r":
                events.append({"op": "r", "ts": ts, "offset": offset,
                               "after": {**KEY, "v": {"value": rng.randrange(3)}, "t": {"value": None},
                                         "s": {"value": [rng.randrange(4)]}}})
            elif kind == "null":
                events.append(write("u", ts, offset, v=None, t=None))
            else:
                events.append(write(kind, ts, offset, **{rng.choice("vt"): rng.randrange(3)}))
        cut = rng.randrange(1, len(events))
        before, after = events[:cut], events[cut:]
        if rng.random() < 0.5:  # mostly in order, as changes come: the micro-batch's later (ties kept)
            after = [{**e, "ts": e["ts"] + 140} for e in after]
            events = before + after
        if not any("kind" not in e for e in before):
            continue
        tracked = rng.choice([None, frozenset({"v", "s"})])
        stored = versions(SPEC, before, tracked)
        current = stored[-1] if stored and stored[-1].end_us is None else None
        covering_ = [(e, False) for e in before if "kind" in e] + [(e, True) for e in after if "kind" in e]
        more = advance(SPEC, current, stored_of(before), [e for e in after if "kind" not in e], covering_, tracked)
        if more is None:
            refused += 1
            continue
        answered += 1
        assert [*stored[:-1 if current else None], *more] == versions(SPEC, events, tracked), (before, after)
    assert answered > 500 and refused > 500, (answered, refused)
