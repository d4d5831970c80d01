"""The history's per-key semantics, as a pure function: every change of one key (and the range /
partition deletes covering it) -> the key's versions (SCD type 2).

Built on the mirror's reference fold (`bridge.spark.fold.reference`), so a version's values are exactly
what the mirror would hold after the same changes: events are sorted by (`ts`, rank, offset); the
changes of one timestamp are folded together and make at most one version; the state at T is
every change with `ts <= T` applied cell by cell (a late change rewrites the versions after it,
since every version is recomputed from all changes of the key). A delete, or a range / partition
delete leaving nothing, ends the open version; a range delete that shadows some cells only starts
a new one. A change of untracked columns only (`tracked`) updates the open version in place.

`advance` continues a key's versions from its open version when every change of the micro-batch
is later than every stored change of the key (the common, in-order case), so the key's history
is not read back; it says when it cannot (a late change), and the caller recomputes the key.

Events are the fold's dicts (docs in `bridge.spark.fold.reference.fold`); a covering range / partition
delete may come as `{"kind": "partition_delete", "key": {}, "ts", "offset"}` once the caller knows
it covers the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from bridge.spark.fold.reference import CELL_TS, MARKER, OFFSET, RANK, TS_US, WRITE_RANK, FoldSpec, fold, rank

DROPPED_OP = "range"  # `op` of a version started by a range / partition delete that shadowed some cells


@dataclass(frozen=True, slots=True)
class Version:
    """One version of a row: its columns (keys and values) from `start_us` until `end_us`
    (exclusive; None: the current version), started by the change `op` at `offset`."""

    start_us: int
    end_us: int | None
    op: str
    offset: int
    row: dict[str, Any]


def _order(event: Mapping[str, Any]) -> tuple[int, int, int]:
    return (int(event["ts"]), rank(event), int(event.get("offset", 0)))


def _visible(spec: FoldSpec, row: Mapping[str, Any]) -> dict[str, Any]:
    names = (*spec.key_columns, *(c.name for c in spec.value_columns))
    return {name: row.get(name) for name in names}


def versions(spec: FoldSpec, events: Iterable[Mapping[str, Any]],
             tracked: frozenset[str] | None = None, current: Version | None = None,
             marker: bool = False) -> list[Version]:
    """The versions of one key, oldest first. `tracked`: the value columns whose changes start a
    version (None: all); the others' changes update the open version in place. `current`: the
    key's open version before `events` (which are then all later than its every change; `marker`:
    whether the row has a row marker), returned first, ended or updated in place if they do so."""
    watched = [c.name for c in spec.value_columns if tracked is None or c.name in tracked]
    state: dict[str, Any] | None = None
    out: list[Version] = []
    if current is not None:
        # No cell timestamps: every cell is older than the events, so a covering delete among them
        # shadows it, as it would with the true ones; the position skips nothing of them either.
        state = {**current.row, MARKER: marker, CELL_TS: {}, TS_US: current.start_us, RANK: WRITE_RANK,
                 OFFSET: current.offset}
        out.append(current)
    for ts, same_time in groupby(sorted(events, key=_order), key=lambda e: int(e["ts"])):
        group = list(same_time)
        result = fold(spec, state, group)
        if result.action == "none":
            continue
        state = result.row if result.action == "upsert" else None
        current = out[-1] if out and out[-1].end_us is None else None
        if state is None:
            if current is not None:
                out[-1] = Version(current.start_us, ts, current.op, current.offset, current.row)
            continue
        row = _visible(spec, state)
        if current is not None and all(current.row.get(n) == row.get(n) for n in watched):
            if row != current.row:  # untracked columns only: the open version, updated in place
                out[-1] = Version(current.start_us, None, current.op, current.offset, row)
            continue
        if current is not None:
            out[-1] = Version(current.start_us, ts, current.op, current.offset, current.row)
        last = group[-1]
        op = DROPPED_OP if "kind" in last else str(last["op"])
        out.append(Version(ts, None, op, int(last.get("offset", 0)), row))
    return out


@dataclass(frozen=True, slots=True)
class Stored:
    """What a key's stored changes leave, read from the changes table: the newest change's
    timestamp, the newest INSERT's or snapshot row's (None: none), the newest delete's."""

    last_ts: int
    last_insert_ts: int | None
    last_delete_ts: int | None


def has_marker(spec: FoldSpec, row: Mapping[str, Any], stored: Stored, covering_ts: Iterable[int]) -> bool:
    """Whether the row (existing after its stored changes and the stored covering deletes at
    `covering_ts`) has a row marker: its newest INSERT / snapshot row is newer than every delete
    (a delete of the same timestamp wins); never on the static row (clustering columns null)."""
    if stored.last_insert_ts is None or any(row.get(name) is None for name in spec.key_columns):
        return False
    deletes = [t for t in (stored.last_delete_ts, *covering_ts) if t is not None]
    return all(stored.last_insert_ts > t for t in deletes)


def advance(spec: FoldSpec, current: Version | None, stored: Stored | None, events: Iterable[Mapping[str, Any]],
            covering: Iterable[tuple[Mapping[str, Any], bool]],
            tracked: frozenset[str] | None = None) -> list[Version] | None:
    """A known key's versions from `current` (its open version; None: the row does not exist)
    onwards, given the micro-batch's changes of the key (`events`) and every range / partition
    delete covering it (`covering`: (event, whether it came in this micro-batch)); None when a
    change or delete of the micro-batch is not later than every stored change of the key (a late
    change rewrites versions before the open one: the caller recomputes the key from all of them).
    The stored covering deletes are applied already (in `current`): a micro-batch's change must
    be later than them too (one newer than the stored changes emptied the row, but a write older
    than it would still have seen the row's earlier cells). `stored` None: a new key (no change
    of it stored, so no version): its versions from nothing, every covering delete applied."""
    if stored is None:
        if current is not None:  # an open version without a stored change: not ours to guess
            return None
        return versions(spec, [*events, *(delete for delete, _ in covering)], tracked)
    stored_covering = [int(delete["ts"]) for delete, new in covering if not new]
    newest = max([stored.last_ts, *stored_covering])
    later = [*events, *(delete for delete, new in covering if new)]
    if any(int(event["ts"]) <= newest for event in later):
        return None
    marker = current is not None and has_marker(spec, current.row, stored, stored_covering)
    return versions(spec, later, tracked, current, marker)


def as_of(history: Iterable[Version], ts: int) -> Version | None:
    """The version holding at `ts` (start <= ts < end), None when the row did not exist then."""
    for version in history:
        if version.start_us <= ts and (version.end_us is None or ts < version.end_us):
            return version
    return None
