"""The mirror's fold in Python over Arrow: the `mapInArrow` function that folds each key's events
(`bridge.spark.fold.events.event_type`), sorted by key and position, into the row to write.

Spark evaluates the higher-order functions a fold in SQL needs (`aggregate`, `transform`,
`map_filter`, ...) interpreted, never compiled: they were the largest single cost of a mirror
micro-batch (docs/spark.md, issue 31). Here a task converts each Arrow batch to Python lists once
per column (in Arrow's C++), walks each key's events in a plain loop and converts the results back
once per column; the key columns are never converted, they are taken from the input by index.

The rules are those of the reference fold (`bridge.spark.fold.reference`, a pure model tested on its own;
tests/spark/test_mirror_fold.py checks this fold against it), in the Delta table's representation
(maps as `(key, value)` pairs, dates and timestamps as Python's): the state holds the row's values,
per-cell write timestamps, the row marker and its timestamp, the position (ts, rank, offset) of the
last change applied, whether a stored row existed and whether anything changed. Per event:

- the stored row (kind -1, first): the state becomes it;
- a data change (kind 0) at or before the position: skipped (a replay, or a change a snapshot row
  holds); `op = d`: every cell and the marker go; otherwise cells set take the change's value,
  element changes apply to the current value (sets, maps, list appends, UDT fields), `m` sets the
  marker, and the written cells and the position take the change's;
- a covering range / partition delete (kind 1) at `ts`: cells and marker written at or before
  `ts` go (a tombstone wins a tie), and so do the elements of a later-written collection that
  were written at or before it (each element's time is kept, as the reference keeps it: in the
  cell timestamps' `name[position]` entries when they differ from the cell's).

This module imports no Spark: its function runs in the Python workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.spark.fold.reference import ROW_MARKER, element_label

STORED, DATA, DELETE = -1, 0, 1


@dataclass(frozen=True, slots=True)
class ValueRule:
    """How the fold treats one value column (`v{i}` in the events)."""

    name: str
    # None (a plain value), "set", "map" (a Spark map: (key, value) pairs), "entries" (a map kept
    # as `{key, value}` structs), "list" or "udt"
    collection: str | None
    has_elements: bool
    ordered: bool  # sets sorted, maps ordered by key in the result (their elements are orderable)
    fields: tuple[str, ...] = ()  # a UDT's field names


def _freeze(value: Any) -> Any:
    """A hashable stand-in of an element or map key (structs arrive as dicts, arrays as lists)."""
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _order_key(value: Any) -> Any:
    # Spark's ordering: structs field by field, arrays element by element, null first.
    if value is None:
        return (0,)
    if isinstance(value, dict):
        return (1, tuple(_order_key(v) for v in value.values()))
    if isinstance(value, list | tuple):
        return (1, tuple(_order_key(v) for v in value))
    return (1, value)


def _sorted(values: list[Any], key: Callable[[Any], Any] | None = None) -> list[Any]:
    pick = key or (lambda v: v)
    try:
        return sorted(values, key=key)
    except TypeError:  # structs or nulls inside: Spark's ordering
        return sorted(values, key=lambda v: _order_key(pick(v)))


def apply_elements(current: Any, added: Any, removed: Any, rule: ValueRule) -> Any:
    """`current` with one element change applied; an empty collection is null (as in CQL)."""
    kind = rule.collection
    if kind == "set":
        members = {_freeze(v): v for v in current or ()}
        for value in removed or ():
            members.pop(_freeze(value), None)
        for value in added or ():
            members.setdefault(_freeze(value), value)
        return list(members.values()) or None
    if kind in ("map", "entries"):
        pairs = current or () if kind == "map" else [(e["key"], e["value"]) for e in current or ()]
        entries = {_freeze(k): (k, v) for k, v in pairs}
        for key in removed or ():
            entries.pop(_freeze(key), None)
        for entry in added or ():
            frozen = _freeze(entry["key"])
            entries.pop(frozen, None)  # a key put again goes after the kept ones, its last value wins
            entries[frozen] = (entry["key"], entry["value"])
        if kind == "map":
            return list(entries.values()) or None
        return [{"key": k, "value": v} for k, v in entries.values()] or None
    if kind == "list":
        return (list(current or ()) + list(added or ())) or None
    if kind == "udt":
        gone = set(removed or ())
        base = current or {}
        new = added or {}
        fields = {name: None if name in gone else new.get(name) if new.get(name) is not None else base.get(name)
                  for name in rule.fields}
        return fields if any(v is not None for v in fields.values()) else None
    raise ValueError(f"column {rule.name}: element changes on a column that is not a collection or UDT")


def element_keys(value: Any, rule: ValueRule) -> list[Any]:
    """The key of each element of a collection (a set's element, a map's key, a list's position,
    a UDT's field name), in the value's order: it finds the element's write time."""
    kind = rule.collection
    if kind == "set":
        return [_freeze(v) for v in value]
    if kind == "map":
        return [_freeze(pair[0]) for pair in value]
    if kind == "entries":
        return [_freeze(entry["key"]) for entry in value]
    if kind == "udt":
        return [name for name in rule.fields if value.get(name) is not None]
    return list(range(len(value)))


def _labels(value: Any, rule: ValueRule) -> list[Any]:
    # an element's entry in the cell timestamps: its position in the stored value, a UDT's field name
    return element_keys(value, rule) if rule.collection == "udt" else list(range(len(value)))


def _added_keys(current: Any, added: Any, rule: ValueRule) -> list[Any]:
    if not added:
        return []
    kind = rule.collection
    if kind == "set":
        return [_freeze(v) for v in added]
    if kind in ("map", "entries"):
        return [_freeze(entry["key"]) for entry in added]
    if kind == "udt":
        return [name for name in rule.fields if added.get(name) is not None]
    count = len(current or ())
    return list(range(count, count + len(added)))


def apply_timed(current: Any, times: dict[Any, int] | None, cell_ts: int | None, added: Any, removed: Any,
                rule: ValueRule, ts: int) -> tuple[Any, dict[Any, int] | None]:
    """`apply_elements` and the elements' write times after it (None: all of the cell's time)."""
    value = apply_elements(current, added, removed, rule)
    if value is None:
        return None, None
    known: dict[Any, int] = {} if times is None else dict(times)
    if times is None and current is not None:
        known = dict.fromkeys(element_keys(current, rule), cell_ts or 0)
    known.update(dict.fromkeys(_added_keys(current, added, rule), ts))
    return value, {key: known[key] for key in element_keys(value, rule)}


def newer_elements(value: Any, times: dict[Any, int], ts: int, rule: ValueRule) -> tuple[Any, dict[Any, int] | None]:
    """The collection without its elements written at or before `ts` (`value` itself when none
    is), and the kept elements' times."""
    keys = element_keys(value, rule)
    keep = [times[key] > ts for key in keys]
    if all(keep):
        return value, times
    if not any(keep):
        return None, None
    if rule.collection == "udt":
        gone = {key for key, kept in zip(keys, keep, strict=True) if not kept}
        return {name: None if name in gone else field for name, field in value.items()}, \
            {key: times[key] for key in keys if key not in gone}
    kept_values = [v for v, kept in zip(value, keep, strict=True) if kept]
    kept_times = [times[key] for key, kept in zip(keys, keep, strict=True) if kept]
    return kept_values, dict(zip(element_keys(kept_values, rule), kept_times, strict=True))


def stored_times(value: Any, cells: dict[str, int], rule: ValueRule) -> dict[Any, int] | None:
    """A stored collection's element times from its `name[label]` entries (None: it has none)."""
    labels = [element_label(rule.name, label) for label in _labels(value, rule)]
    if not any(label in cells for label in labels):
        return None
    cell = cells.get(rule.name, 0)
    return {key: cells.get(label, cell) for key, label in zip(element_keys(value, rule), labels, strict=True)}


def _element_entries(value: Any, times: dict[Any, int] | None, cell_ts: int, rule: ValueRule) -> list[tuple[str, int]]:
    """The cell timestamps' entries of a collection's elements (of its canonical `value`), when
    they are not all the cell's time."""
    if times is None:
        return []
    keys = element_keys(value, rule)
    if all(times[key] == cell_ts for key in keys):
        return []
    labels = _labels(value, rule)
    return [(element_label(rule.name, label), times[key]) for key, label in zip(keys, labels, strict=True)]


def _canonical(value: Any, rule: ValueRule) -> Any:
    if value is None or not rule.ordered:
        return value
    if rule.collection == "set":
        return _sorted(value)
    if rule.collection == "map":
        return _sorted(value, key=lambda pair: pair[0])
    return value


class _Columns:
    """One Arrow batch's events as Python lists, one per field of the event struct."""

    def __init__(self, events: Any, cells: Any, rules: Sequence[ValueRule]) -> None:
        names = [f.name for f in events.type]
        lists = dict(zip(names, (child.to_pylist() for child in events.flatten()), strict=True))
        self.ts, self.rank, self.off = lists["ts"], lists["rank"], lists["off"]
        self.kind, self.op, self.m, self.mts = lists["kind"], lists["op"], lists["m"], lists["mts"]
        self.pts, self.prk, self.poff = lists["pts"], lists["prk"], lists["poff"]
        # a stored row's cell timestamps, element times included (read only when a column has elements)
        has_elements = any(rule.has_elements for rule in rules)
        self.cells = cells.to_pylist() if has_elements and cells is not None else [None] * len(self.ts)
        self.v = [lists[f"v{i}"] for i in range(len(rules))]
        self.c = [lists[f"c{i}"] for i in range(len(rules))]
        self.t = [lists[f"t{i}"] for i in range(len(rules))]
        # per value column with element changes: (index, e, a, r)
        self.elements = [(i, lists[f"e{i}"], lists[f"a{i}"], lists[f"r{i}"])
                         for i, rule in enumerate(rules) if rule.has_elements]


Folded = tuple[bool, int | None, int | None, int | None, list[tuple[str, int]], list[Any], str]


def fold_key(cols: _Columns, start: int, end: int, rules: Sequence[ValueRule]) -> Folded | None:
    """The events `start:end` of one key, in order of position: (marker, ts, rank, offset, cell
    timestamps, values, action), or None when nothing changes."""
    n = len(rules)
    stored = changed = marker = False
    marker_ts = pts = prk = poff = None
    v: list[Any] = [None] * n
    t: list[Any] = [None] * n
    et: list[dict[Any, int] | None] = [None] * n  # a collection's element times; None: all of `t[i]`
    for j in range(start, end):
        kind = cols.kind[j]
        if kind == STORED:
            stored, changed, marker, marker_ts = True, False, bool(cols.m[j]), cols.mts[j]
            pts, prk, poff = cols.pts[j], cols.prk[j], cols.poff[j]
            v = [column[j] for column in cols.v]
            t = [column[j] for column in cols.t]
            et = _stored_element_times(cols.cells[j], v, rules)
            continue
        ts = cols.ts[j]
        if kind == DELETE:  # a range / partition delete covering the key
            shadowed = marker and (marker_ts or 0) <= ts
            if shadowed:
                marker, marker_ts = False, None
            for i in range(n):
                if v[i] is None:
                    continue
                if (t[i] or 0) <= ts:
                    v[i] = t[i] = et[i] = None
                    shadowed = True
                elif (times := et[i]) is not None:  # written after `ts`: its elements older than `ts` go
                    kept, times = newer_elements(v[i], times, ts, rules[i])
                    if kept is not v[i]:
                        v[i], et[i], shadowed = kept, times, True
                        if kept is None:
                            t[i] = None
            if shadowed:
                changed = True
                if not marker and all(value is None for value in v):
                    pts = prk = poff = None  # the row is gone, and its position with it (as fold.fold)
            continue
        rank, off = cols.rank[j], cols.off[j]
        if pts is not None and (ts < pts or (ts == pts and (rank < prk or (rank == prk and off <= poff)))):
            continue  # at or before the position: a replay, or held by a snapshot row
        pts, prk, poff, changed = ts, rank, off, True
        if cols.op[j] == "d":
            marker, marker_ts = False, None
            v, t, et = [None] * n, [None] * n, [None] * n
            continue
        if cols.m[j]:
            marker, marker_ts = True, ts
        for i, set_cells in enumerate(cols.c):
            if set_cells[j]:
                v[i], t[i], et[i] = cols.v[i][j], ts, None
        for i, elements, added, removed in cols.elements:
            if elements[j]:
                v[i], et[i] = apply_timed(v[i], et[i], t[i], added[j], removed[j], rules[i], ts)
                t[i] = ts
    if not changed:
        return None
    if marker or any(value is not None for value in v):
        action = "upsert"
    elif stored:
        action = "delete"
    else:
        return None
    values = [_canonical(value, rule) for value, rule in zip(v, rules, strict=True)]
    cell_ts = [(ROW_MARKER, marker_ts)] if marker and marker_ts is not None else []
    for i, rule in enumerate(rules):
        if values[i] is not None and t[i] is not None:
            cell_ts.append((rule.name, t[i]))
            cell_ts += _element_entries(values[i], et[i], t[i], rule)
    return marker, pts, prk, poff, cell_ts, values, action


def _stored_element_times(cells: list[tuple[str, int]] | None, values: list[Any],
                          rules: Sequence[ValueRule]) -> list[dict[Any, int] | None]:
    if not cells or not any(name.endswith("]") for name, _ in cells):  # no element has its own time
        return [None] * len(rules)
    entries = dict(cells)
    return [stored_times(value, entries, rule) if rule.has_elements and value is not None else None
            for value, rule in zip(values, rules, strict=True)]


def _boundaries(keys: list[tuple[Any, ...]]) -> list[int]:
    """Where each key's run of events starts (the events are sorted by key)."""
    return [j for j in range(len(keys)) if j == 0 or keys[j] != keys[j - 1]]


def fold_batches(key_names: Sequence[str], rules: Sequence[ValueRule],
                 marker: str, ts_us: str, offset: str, cell_ts: str, rank: str,
                 action: str, cells: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The `mapInArrow` function over a partition of (key columns, `x`, `cells`: a stored row's cell
    timestamps) sorted by key and position:
    one row per key that changes (key columns, values, the bookkeeping columns named by the
    arguments, the action 'upsert' | 'delete'). A key's events may span two Arrow batches: the
    last key of a batch waits for the next."""
    key_names, rules = list(key_names), list(rules)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        schema = None
        tail = None
        for batch in batches:
            if tail is not None:
                batch = pa.concat_batches([tail, batch])
            if schema is None:
                schema = _schema(pa, batch.schema, key_names, rules, marker, ts_us, offset, cell_ts, rank, action)
            keys = list(zip(*[batch.column(name).to_pylist() for name in key_names], strict=True))
            starts = _boundaries(keys)
            if not starts:
                continue
            tail = batch.slice(starts[-1])
            done = _fold(pa, batch.slice(0, starts[-1]), starts[:-1], key_names, rules, schema, cells)
            if done is not None:
                yield done
        if tail is not None and schema is not None:
            done = _fold(pa, tail, [0], key_names, rules, schema, cells)
            if done is not None:
                yield done

    return run


def _schema(pa: Any, given: Any, key_names: list[str], rules: list[ValueRule], marker: str, ts_us: str,
            offset: str, cell_ts: str, rank: str, action: str) -> Any:
    events = given.field("x").type
    fields = [given.field(name) for name in key_names]
    fields += [pa.field(rule.name, events.field(f"v{i}").type) for i, rule in enumerate(rules)]
    fields += [pa.field(marker, pa.bool_()), pa.field(ts_us, pa.int64()), pa.field(offset, pa.int64()),
               pa.field(cell_ts, pa.map_(pa.string(), pa.int64())), pa.field(rank, pa.int32()),
               pa.field(action, pa.string())]
    return pa.schema(fields)


def _fold(pa: Any, batch: Any, starts: list[int], key_names: list[str], rules: list[ValueRule],
          schema: Any, cells: str) -> Any:
    """The folded rows of the keys starting at `starts` (the last runs to the batch's end)."""
    if not starts:
        return None
    cols = _Columns(batch.column("x"), batch.column(cells), rules)
    ends = [*starts[1:], batch.num_rows]
    taken: list[int] = []
    rows: list[Folded] = []
    for start, end in zip(starts, ends, strict=True):
        folded = fold_key(cols, start, end, rules)
        if folded is not None:
            taken.append(start)
            rows.append(folded)
    if not rows:
        return None
    indices = pa.array(taken, pa.int64())
    arrays = [batch.column(name).take(indices) for name in key_names]
    markers, positions, ranks, offsets, stamps, values, actions = zip(*rows, strict=True)
    columns = list(zip(*values, strict=True))
    n = len(key_names)
    arrays += [pa.array(list(columns[i]), schema.field(n + i).type) for i in range(len(rules))]
    arrays += [pa.array(list(markers), pa.bool_()), pa.array(list(positions), pa.int64()),
               pa.array(list(offsets), pa.int64()), pa.array(list(stamps), pa.map_(pa.string(), pa.int64())),
               pa.array(list(ranks), pa.int32()), pa.array(list(actions), pa.string())]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
