"""Pairing a record's pre/post-image rows with its delta rows by primary key. Pure code (no
driver import), shared by the source and the translator: the one pairing rule."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.values import canonical


@dataclass(frozen=True, slots=True)
class RowChange:
    """The rows of one record about one primary key: its delta rows in order, and the pre- and
    post-image rows written for it (None when the table has no such images or the operation
    gets none). `deltas` is empty only for an image with no delta row of the same key, which
    the format does not produce; it is kept rather than dropped."""

    key: tuple[Any, ...]
    deltas: tuple[LogRow, ...]
    pre_image: LogRow | None
    post_image: LogRow | None


_PLAIN = frozenset({int, str, bytes, float, bool, uuid.UUID, type(None)})


def _key_of(row: LogRow, key_columns: Sequence[str]) -> tuple[Any, ...]:
    values = row.values
    return tuple(v if v.__class__ in _PLAIN else canonical(v) for v in map(values.get, key_columns))


_IMAGES = frozenset({Operation.PRE_IMAGE, Operation.POST_IMAGE})


def pair_images(record: ChangeRecord, key_columns: Sequence[str]) -> tuple[RowChange, ...]:
    """Pair the record's image rows with its delta rows by primary key (the values of
    `key_columns` in their canonical form, `bridge.scylla.values`; the static row's clustering
    columns are null), in the order the keys first appear. The one pairing rule: the translator
    pairs with it too."""
    if len(record.rows) == 1 and record.rows[0].operation not in _IMAGES:  # most records: one delta row
        row = record.rows[0]
        return (RowChange(_key_of(row, key_columns), (row,), None, None),)
    deltas: dict[tuple[Any, ...], list[LogRow]] = {}
    pre: dict[tuple[Any, ...], LogRow] = {}
    post: dict[tuple[Any, ...], LogRow] = {}
    order: list[tuple[Any, ...]] = []
    for row in record.rows:
        key = _key_of(row, key_columns)
        if key not in deltas:
            deltas[key] = []
            order.append(key)
        if row.operation is Operation.PRE_IMAGE:
            pre[key] = row
        elif row.operation is Operation.POST_IMAGE:
            post[key] = row
        else:
            deltas[key].append(row)
    return tuple(RowChange(k, tuple(deltas[k]), pre.get(k), post.get(k)) for k in order)

