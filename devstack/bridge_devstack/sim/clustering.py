"""Clustering order: sorting clustering keys, and range bounds over key prefixes.

A range is `[start, end]` in clustering order (descending columns already accounted for), with
each bound a prefix of the clustering key plus an inclusive flag; an empty prefix is unbounded.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bridge.scylla.schema import Column
from bridge_devstack.sim.values import sort_key


@dataclass(frozen=True, slots=True)
class Bound:
    prefix: tuple[Any, ...]
    inclusive: bool = True

    @property
    def unbounded(self) -> bool:
        return not self.prefix


@dataclass(frozen=True, slots=True)
class ClusteringRange:
    start: Bound
    end: Bound


@functools.total_ordering
class _Descending:
    """Wraps a sort key to reverse its order (a `DESC` clustering column)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.key == other.key

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.key < self.key)

    def __hash__(self) -> int:
        return hash(self.key)


def component_key(value: Any, column: Column) -> Any:
    key = sort_key(value, column.type)
    return _Descending(key) if column.descending else key


def row_key(ck: tuple[Any, ...], columns: Sequence[Column]) -> tuple[Any, ...]:
    """Sort key of a (full or partial) clustering key in clustering order."""
    return tuple(component_key(v, c) for v, c in zip(ck, columns, strict=False))


def compare_prefixes(left: tuple[Any, ...], right: tuple[Any, ...], columns: Sequence[Column]) -> int:
    """-1/0/1 comparing the common part of two prefixes in clustering order."""
    for a, b, column in zip(left, right, columns, strict=False):
        ka, kb = component_key(a, column), component_key(b, column)
        if ka < kb:
            return -1
        if kb < ka:
            return 1
    return 0


def _position(bound: Bound, is_start: bool) -> int:
    """Where a bound sits relative to the keys starting with its prefix: -1 before them all
    (an inclusive start, an exclusive end), +1 after them all."""
    before = bound.inclusive if is_start else not bound.inclusive
    return -1 if before else 1


def _compare_positions(a: Bound, a_start: bool, b: Bound, b_start: bool, columns: Sequence[Column]) -> int:
    if a.unbounded or b.unbounded:
        sa = (-1 if a_start else 1) if a.unbounded else 0
        sb = (-1 if b_start else 1) if b.unbounded else 0
        if sa != sb:
            return -1 if sa < sb else 1
        if sa:  # both unbounded on the same side
            return 0
    common = compare_prefixes(a.prefix, b.prefix, columns)
    if common:
        return common
    pa, pb = _position(a, a_start), _position(b, b_start)
    if len(a.prefix) == len(b.prefix):
        return (pa > pb) - (pa < pb)
    # The shorter prefix's position decides: before all keys of its prefix, or after them all.
    if len(a.prefix) < len(b.prefix):
        return pa
    return -pb


def is_empty(rng: ClusteringRange, columns: Sequence[Column]) -> bool:
    """True when no clustering key can fall inside the range (e.g. `ck > 2 AND ck < 1`)."""
    return _compare_positions(rng.start, True, rng.end, False, columns) >= 0


def contains(rng: ClusteringRange, ck: tuple[Any, ...], columns: Sequence[Column]) -> bool:
    """Whether a full clustering key lies inside the range."""
    point = Bound(ck, True)
    after_start = rng.start.unbounded or _compare_positions(rng.start, True, point, True, columns) <= 0
    before_end = rng.end.unbounded or _compare_positions(point, True, rng.end, False, columns) < 0
    return after_start and before_end
