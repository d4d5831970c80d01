"""The history's per-key semantics, as a pure function: every change of one key (and the range /
partition deletes covering it) -> the key's versions (SCD type 2).

Built on the mirror's reference fold (`bridge.spark.fold`), so a version's values are exactly
what the mirror would hold after the same changes: events are sorted by (`ts`, rank, offset); the
changes of one timestamp are folded together and make at most one version; the state at T is
every change with `ts <= T` applied cell by cell (a late change rewrites the versions after it,
since every version is recomputed from all changes of the key). A delete, or a range / partition
delete leaving nothing, ends the open version; a range delete that shadows some cells only starts
a new one. A change of untracked columns only (`tracked`) updates the open version in place.

Events are the fold's dicts (docs in `bridge.spark.fold.fold`); a covering range / partition
delete may come as `{"kind": "partition_delete", "key": {}, "ts", "offset"}` once the caller knows
it covers the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from bridge.spark.fold import FoldSpec, fold, rank

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
             tracked: frozenset[str] | None = None) -> list[Version]:
    """The versions of one key, oldest first. `tracked`: the value columns whose changes start a
    version (None: all); the others' changes update the open version in place."""
    watched = [c.name for c in spec.value_columns if tracked is None or c.name in tracked]
    state: dict[str, Any] | None = None
    out: list[Version] = []
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


def as_of(history: Iterable[Version], ts: int) -> Version | None:
    """The version holding at `ts` (start <= ts < end), None when the row did not exist then."""
    for version in history:
        if version.start_us <= ts and (version.end_us is None or ts < version.end_us):
            return version
    return None
