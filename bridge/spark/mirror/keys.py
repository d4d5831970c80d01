"""The keys a compaction touches as a filter on the mirror's key columns, so that Delta skips the
files that cannot hold them (their min/max statistics) in the stored-row lookup and in the MERGE's
search of the files it rewrites: the compaction's cost then follows its pending changes where the
table's files are clustered by key (docs/spark.md, "Merge-on-read").

Per key column of an orderable type: the pending values themselves (an `IN` list) when they are
few, else their range; a null value (a static row's clustering columns) adds `IS NULL`. The filter
is a superset of the keys (each column bounded on its own): the key joins and the MERGE's key
condition stay exact, the filter only narrows what they read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

# Pending keys up to which each column is bounded by its values (an IN list in the plan and the
# MERGE condition, a few KB); above, by the range of its values.
IN_LIST_MAX = 1_000

# Types Delta keeps min/max statistics of (not boolean, binary or nested types: no skipping there),
# and whose values come back from the driver exactly: not floating point (NaN orders above every
# number in Spark), nor timestamps (collected as naive local times, which a DST change repeats).
ORDERABLE = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType, T.StringType, T.DateType,
             T.TimestampNTZType)


@dataclass(frozen=True, slots=True)
class Bound:
    """The values a key column takes among the touched keys: `values` (distinct, not null) when
    they are few, else `low`..`high` (None: every value is null); `nulls`: some are null."""

    column: str
    values: tuple[Any, ...] | None
    low: Any
    high: Any
    nulls: bool


def bounds_of_keys(names: Sequence[str], keys: Sequence[Sequence[Any]]) -> list[Bound]:
    """Each named column's distinct values among `keys` (rows of those columns, in that order)."""
    found = []
    for i, name in enumerate(names):
        values = tuple(dict.fromkeys(k[i] for k in keys if k[i] is not None))
        found.append(Bound(name, values, None, None, any(k[i] is None for k in keys)))
    return found


def bounds_of_ranges(ranges: Mapping[str, tuple[Any, Any, bool]]) -> list[Bound]:
    """Each column's (min, max, has nulls) as its bound."""
    return [Bound(name, None, low, high, nulls) for name, (low, high, nulls) in ranges.items()]


def predicate(bound: Bound, prefix: str = "") -> Column:
    """The bound as a predicate on the column (`prefix`: a table alias, `t.` in a MERGE)."""
    column = F.col(f"{prefix}`{bound.column}`")
    if bound.values is not None:
        kept = column.isin(list(bound.values)) if bound.values else None
    else:
        kept = column.between(F.lit(bound.low), F.lit(bound.high)) if bound.low is not None else None
    if kept is None:
        return column.isNull() if bound.nulls else F.lit(False)
    return kept | column.isNull() if bound.nulls else kept


def conjunction(bounds: Sequence[Bound], prefix: str = "") -> Column | None:
    """Every bound's predicate, None when there is none (no column Delta could skip files by)."""
    predicates = [predicate(b, prefix) for b in bounds]
    return reduce(lambda a, b: a & b, predicates) if predicates else None


def orderable(frame: DataFrame, names: Sequence[str]) -> list[str]:
    """The columns among `names` whose type has min/max statistics."""
    return [n for n in names if isinstance(frame.schema[n].dataType, ORDERABLE)]


def key_bounds(keys: DataFrame, count: int) -> list[Bound]:
    """The bounds of the orderable columns of `keys` (a frame of key columns, `count` rows): their
    distinct values when `count` is at most IN_LIST_MAX (collected), else their ranges (one
    aggregation)."""
    names = orderable(keys, keys.columns)
    if not names:
        return []
    quoted = [F.col(f"`{n}`") for n in names]
    if count <= IN_LIST_MAX:
        return bounds_of_keys(names, [tuple(r) for r in keys.select(*quoted).distinct().collect()])
    aggregates = [agg for i, c in enumerate(quoted)
                  for agg in (F.min(c).alias(f"l{i}"), F.max(c).alias(f"h{i}"),
                              F.max(c.isNull().cast("int")).alias(f"n{i}"))]
    row = keys.agg(*aggregates).first()
    if row is None:
        return []
    return bounds_of_ranges({n: (row[f"l{i}"], row[f"h{i}"], bool(row[f"n{i}"])) for i, n in enumerate(names)})


def any_of(sets: Sequence[Sequence[Bound]], prefix: str = "") -> Column | None:
    """The rows meeting every bound of one of `sets` (each a kind of touched key); None (no filter)
    when there is no set or one has no bound."""
    conjunctions = [conjunction(bounds, prefix) for bounds in sets]
    if not conjunctions or any(c is None for c in conjunctions):
        return None
    return reduce(lambda a, b: a | b, [c for c in conjunctions if c is not None])
