"""The mirror's per-row semantics, as a pure function: stored row + the micro-batch's changes of
that row (and range / partition deletes of its partition) -> what to write back.

Rows and changes are plain dicts in the Connect representation the envelope uses (maps as lists
of `{"key", "value"}` entries, dates as days, timestamps as epoch milliseconds), so this module
knows nothing about Spark and is tested on its own.

Rules (docs/spark.md "Mirror semantics"):
- changes apply in order of (`source.ts_us`, rank, record order), the rank ordering the changes
  of one timestamp: writes (`c`, `u`), then snapshot rows (`r`), then deletes. ScyllaDB lets a
  tombstone win over a write with the same timestamp; a snapshot row holds every write up to its
  own timestamp (its `ts_us` is at or after each of them), so a write of the same timestamp is
  already in it (a list append must not be applied twice);
- a cell `null` leaves the stored value alone, `{"value": v}` sets it, `{"value": null}` sets null;
- `X__elements` applies element changes to the stored collection: sets (add / remove elements),
  maps (put entries / remove keys), UDTs (set fields / null fields), lists (appends; a removal by
  list key cannot be applied to a list the mirror only knows as values, it is counted);
- `op = d` deletes the row; a range delete removes the rows of its partition whose clustering
  key lies within its bounds, a partition delete every row of the partition;
- a snapshot row (`op = r`) is a whole-row write: every cell it carries is set (collections
  whole);
- an INSERT (`op = c`) or a snapshot row (`op = r`) gives the row a row marker, like CQL: a row
  stays while it has the marker or any non-null regular column, and disappears otherwise (an
  UPDATE that nulls its last cell). The static row (clustering columns null) never gets one: CQL's
  static row has no marker (ScyllaDB logs a static-only INSERT as an update);
- every stored row remembers the position (`ts_us`, rank, offset) of the last change applied to
  it, and changes at or before it are skipped: a micro-batch replayed after a restart changes
  nothing, and a change at or before a snapshot row's timestamp (already in it) is not applied
  after it;
- every stored cell (and the row marker, under the key "") remembers the timestamp it was written
  at: a range / partition delete that arrives after newer writes of its rows (the dropped-changes
  topic is read beside the data topics, not in step with them) removes only what is older than
  it, as in CQL where a tombstone shadows writes up to its own timestamp;
- so does every element of a collection (a UDT's fields too), as ScyllaDB keeps a write time per
  element: a cell's entry is its latest write, and when its elements were not all written then,
  each has its own entry `name[position]` (a UDT's `name[field]`), the position in the stored
  value. A delete between two element changes removes the older elements only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

MARKER = "_cdc_marker"
TS_US = "_cdc_ts_us"
OFFSET = "_cdc_offset"
CELL_TS = "_cdc_cell_ts"
RANK = "_cdc_rank"  # the position's rank (WRITE or SNAPSHOT); null in rows written before it existed: WRITE
HIDDEN = (MARKER, TS_US, OFFSET, CELL_TS, RANK)
ROW_MARKER = ""  # the marker's entry in CELL_TS
# The order of the changes of one timestamp: writes, snapshot rows (which hold them), deletes.
WRITE_RANK, SNAPSHOT_RANK, DELETE_RANK = 0, 1, 2

Action = Literal["upsert", "delete", "none"]
ELEMENTS = "__elements"


@dataclass(frozen=True, slots=True)
class ValueColumn:
    name: str
    collection: str | None  # "set" | "map" | "list" | "udt" | None
    has_elements: bool


@dataclass(frozen=True, slots=True)
class FoldSpec:
    key_columns: tuple[str, ...]
    value_columns: tuple[ValueColumn, ...]


@dataclass(slots=True)
class FoldResult:
    action: Action
    row: dict[str, Any] | None
    unapplied_list_removals: int = 0


def rank(event: Mapping[str, Any]) -> int:
    """Where a change sorts among the changes of its timestamp: dropped changes (range and
    partition deletes) and `d` last, `r` before them, `c` / `u` first."""
    if "kind" in event or event["op"] == "d":
        return DELETE_RANK
    return SNAPSHOT_RANK if event["op"] == "r" else WRITE_RANK


def _order(event: Mapping[str, Any]) -> tuple[int, int, int]:
    return (int(event["ts"]), rank(event), int(event.get("offset", 0)))


def fold(spec: FoldSpec, stored: Mapping[str, Any] | None, events: Iterable[Mapping[str, Any]]) -> FoldResult:
    """Apply `events` (data changes `{"op", "ts", "offset", "after"}` and dropped changes
    `{"kind", "ts", "offset", "key", "start", "start_inclusive", "end", "end_inclusive"}`)
    to the `stored` row (None: no row)."""
    row: dict[str, Any] | None = dict(stored) if stored is not None else None
    # A stored row's position is that of a write or a snapshot row; deletes of its timestamp sort after it.
    position = (int(row[TS_US]), int(row.get(RANK) or WRITE_RANK), int(row[OFFSET])) if row is not None else None
    changed = False
    ignored_removals = 0
    for event in sorted(events, key=_order):
        if "kind" in event:
            if row is None or not in_range(spec, row, event):
                continue
            if _shadow(spec, row, int(event["ts"])):
                changed = True
                if not _exists(spec, row):
                    row, position = None, None
            continue
        event_position = _order(event)
        if position is not None and event_position <= position:
            continue
        if event["op"] == "d":
            row, position, changed = None, None, True
            continue
        after = event.get("after") or {}
        if row is None:
            row = {name: after.get(name) for name in spec.key_columns}
            row.update({c.name: None for c in spec.value_columns})
            row[MARKER] = False
        written = dict(row.get(CELL_TS) or {})
        ts = int(event["ts"])
        if event["op"] in ("c", "r") and not any(row.get(name) is None for name in spec.key_columns):
            row[MARKER] = True  # not on the static row (clustering columns null), which has no marker
            written[ROW_MARKER] = ts
        for column in spec.value_columns:
            cell = after.get(column.name)
            if cell is not None:
                row[column.name] = _normalise(cell.get("value"), column)
                written[column.name] = ts
                _keep_element_times(row, column, written, None)
            elements = after.get(column.name + ELEMENTS) if column.has_elements else None
            if elements is not None:
                times = element_times(row, column, written)
                count = len(row[column.name] or ())
                row[column.name], ignored = apply_elements(row[column.name], elements, column)
                ignored_removals += ignored
                times.update(dict.fromkeys(_added_keys(elements, column, count), ts))
                written[column.name] = ts
                _keep_element_times(row, column, written, times)
        row[CELL_TS] = written
        position = event_position
        row[TS_US], row[RANK], row[OFFSET] = position
        changed = True
    if not changed:
        return FoldResult("none", None, ignored_removals)
    if row is None or not _exists(spec, row):
        return FoldResult("delete" if stored is not None else "none", None, ignored_removals)
    return FoldResult("upsert", row, ignored_removals)


def _shadow(spec: FoldSpec, row: dict[str, Any], ts: int) -> bool:
    """Apply a range / partition delete at `ts` to a row it covers: cells and the marker written
    at or before `ts` go (a tombstone wins a tie); returns whether anything went."""
    written = dict(row.get(CELL_TS) or {})
    removed = False
    for column in spec.value_columns:
        value = row.get(column.name)
        if value is None:
            continue
        if written.get(column.name, 0) <= ts:
            row[column.name] = None
            written.pop(column.name, None)
            _keep_element_times(row, column, written, None)
            removed = True
        elif column.has_elements:  # written after `ts`: its elements older than `ts` go
            kept, times = _newer_elements(value, column, element_times(row, column, written), ts)
            if kept is not value:
                row[column.name] = kept
                if kept is None:
                    written.pop(column.name, None)
                _keep_element_times(row, column, written, times)
                removed = True
    if row.get(MARKER) and written.get(ROW_MARKER, 0) <= ts:
        row[MARKER] = False
        written.pop(ROW_MARKER, None)
        removed = True
    row[CELL_TS] = written
    return removed


def element_label(name: str, label: int | str) -> str:
    """The entry in CELL_TS of one element's write time: its position in the stored value (a
    UDT: its field name) after the column's name."""
    return f"{name}[{label}]"


def _element_keys(value: Any, column: ValueColumn) -> list[tuple[int | str, Any]]:
    """(label, key) of each element of a stored collection: the key finds its write time as
    element changes come (a set's element, a map's key, a UDT field's name, a list's position)."""
    if column.collection == "udt":
        return [(name, name) for name, field_value in value.items() if field_value is not None]
    if column.collection == "map":
        return [(k, _hashable(entry["key"])) for k, entry in enumerate(value)]
    if column.collection == "set":
        return [(k, _hashable(element)) for k, element in enumerate(value)]
    return [(k, k) for k in range(len(value))]


def element_times(row: Mapping[str, Any], column: ValueColumn, written: Mapping[str, int]) -> dict[Any, int]:
    """Each element's write time by its key: its own entry, else the cell's (all were written then)."""
    value = row.get(column.name)
    if value is None or not column.has_elements:
        return {}
    cell = written.get(column.name, 0)
    return {key: written.get(element_label(column.name, label), cell) for label, key in _element_keys(value, column)}


def _added_keys(elements: Mapping[str, Any], column: ValueColumn, count: int) -> list[Any]:
    """The keys an element change writes; list appends go after the `count` elements there were."""
    added = elements.get("added")
    if not added:
        return []
    if column.collection == "udt":
        return [name for name, value in added.items() if value is not None]
    if column.collection == "map":
        return [_hashable(entry["key"]) for entry in added]
    if column.collection == "set":
        return [_hashable(element) for element in added]
    return list(range(count, count + len(added)))


def _keep_element_times(row: Mapping[str, Any], column: ValueColumn, written: dict[str, int],
                        times: Mapping[Any, int] | None) -> None:
    """Write the column's element entries anew from `times` (None: all were written with the
    cell), only when they are not all the cell's own time."""
    prefix = column.name + "["
    for name in [name for name in written if name.startswith(prefix)]:
        del written[name]
    value = row.get(column.name)
    if times is None or value is None:
        return
    labelled = [(label, times[key]) for label, key in _element_keys(value, column)]
    if any(ts != written[column.name] for _, ts in labelled):
        written.update({element_label(column.name, label): ts for label, ts in labelled})


def _newer_elements(value: Any, column: ValueColumn, times: dict[Any, int], ts: int) -> tuple[Any, dict[Any, int]]:
    """The collection without its elements written at or before `ts` (`value` itself when none
    is), and the kept elements' times (a list's by their new positions)."""
    keys = _element_keys(value, column)
    kept = {key for _, key in keys if times[key] > ts}
    if len(kept) == len(keys):
        return value, times
    if column.collection == "udt":
        fields = {name: (field if name in kept else None) for name, field in value.items()}
        return (fields if kept else None), {key: times[key] for key in kept}
    elements = [element for element, (_, key) in zip(value, keys, strict=True) if key in kept]
    if column.collection == "list":
        return (elements or None), {k: times[key] for k, key in enumerate(sorted(kept))}
    return (elements or None), {key: times[key] for key in kept}


def _exists(spec: FoldSpec, row: Mapping[str, Any]) -> bool:
    return bool(row.get(MARKER)) or any(row.get(c.name) is not None for c in spec.value_columns)


def _normalise(value: Any, column: ValueColumn) -> Any:
    # CQL has no empty non-frozen collection: it reads back as null.
    if column.has_elements and value in ([], {}):
        return None
    return value


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def _sorted(values: Iterable[Any]) -> list[Any]:
    items = list(values)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))


def apply_elements(current: Any, change: Mapping[str, Any], column: ValueColumn) -> tuple[Any, int]:
    """`current` with one `X__elements` change applied; returns (value, list removals ignored)."""
    added, removed = change.get("added"), change.get("removed") or []
    kind = column.collection
    if kind == "set":
        members = {_hashable(v): v for v in current or []}
        for value in removed:
            members.pop(_hashable(value), None)
        for value in added or []:
            members[_hashable(value)] = value
        return (_sorted(members.values()) or None), 0
    if kind == "map":
        entries = {_hashable(e["key"]): e for e in current or []}
        for key in removed:
            entries.pop(_hashable(key), None)
        for entry in added or []:
            entries[_hashable(entry["key"])] = {"key": entry["key"], "value": entry["value"]}
        ordered = [entries[k] for k in _sorted_keys(entries)]
        return (ordered or None), 0
    if kind == "list":
        values = list(current or []) + [entry["value"] for entry in added or []]
        return (values or None), len(removed)
    if kind == "udt":
        fields = dict(current or {})
        for name, value in (added or {}).items():
            if value is not None:
                fields[name] = value
        for name in removed:
            fields[name] = None
        return (fields if any(v is not None for v in fields.values()) else None), 0
    raise ValueError(f"column {column.name}: element changes on a column that is not a collection or UDT")


def _sorted_keys(entries: Mapping[Any, Mapping[str, Any]]) -> list[Any]:
    keys = list(entries)
    try:
        return sorted(keys, key=lambda k: entries[k]["key"])
    except TypeError:
        return sorted(keys, key=str)


def in_range(spec: FoldSpec, row: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Whether a range or partition delete covers `row` (same partition, clustering in bounds)."""
    key = event.get("key") or {}
    clustering = clustering_columns(event)
    for name, value in key.items():
        if name not in clustering and value is not None and row.get(name) != value:
            return False
    if event.get("kind") == "partition_delete":
        return True
    values = [row.get(name) for name in clustering]
    if any(v is None for v in values):
        return False  # the static row is not in any clustering range
    return _after_start(values, event) and _before_end(values, event)


def clustering_columns(event: Mapping[str, Any]) -> list[str]:
    for bound in ("start", "end"):
        if isinstance(event.get(bound), dict):
            return list(event[bound])
    return [name for name, value in (event.get("key") or {}).items() if value is None]


def _prefix(bound: Mapping[str, Any] | None, clustering: Sequence[str]) -> list[Any]:
    values: list[Any] = []
    for name in clustering:
        value = (bound or {}).get(name)
        if value is None:
            break
        values.append(value)
    return values


def _after_start(values: list[Any], event: Mapping[str, Any]) -> bool:
    prefix = _prefix(event.get("start"), clustering_columns(event))
    if not prefix:
        return True
    head = values[: len(prefix)]
    return head >= prefix if event.get("start_inclusive", True) else head > prefix


def _before_end(values: list[Any], event: Mapping[str, Any]) -> bool:
    prefix = _prefix(event.get("end"), clustering_columns(event))
    if not prefix:
        return True
    head = values[: len(prefix)]
    return head <= prefix if event.get("end_inclusive", True) else head < prefix
