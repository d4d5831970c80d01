"""WHERE clauses of writes -> the partition keys, clustering keys and clustering ranges they name.

Follows Cassandra's rules for modification statements: every partition key column restricted by
`=` or `IN`; clustering columns restricted in order by `=`/`IN` (single or tuple form), then at most
one slice (single column, or tuple form whose two sides may have different lengths). Errors use
Cassandra's wording.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bridge.scylla.schema import Column, TableSchema
from bridge_devstack.sim.clustering import Bound, ClusteringRange, is_empty
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.literals import Resolver
from bridge_devstack.sim.errors import InvalidRequestError, UnsupportedCqlError


@dataclass(frozen=True, slots=True)
class Selection:
    """What a WHERE clause selects inside each of `partitions`: nothing below the partition
    (`rows` and `ranges` empty and `has_clustering` False), whole rows, or ranges."""

    partitions: tuple[tuple[Any, ...], ...]
    rows: tuple[tuple[Any, ...], ...] = ()
    ranges: tuple[ClusteringRange, ...] = ()
    has_clustering: bool = False

    @property
    def is_full_rows(self) -> bool:
        return self.has_clustering and not self.ranges


def select(table: TableSchema, relations: Sequence[ast.Relation], resolver: Resolver) -> Selection:
    by_column: dict[str, list[ast.Relation]] = {}
    for relation in relations:
        for name in relation.columns:
            column = _column(table, name)
            if not column.is_key:
                raise InvalidRequestError(f"Non PRIMARY KEY columns found in where clause: {name}")
        by_column.setdefault(relation.columns[0], []).append(relation)
    partitions = _partition_keys(table, by_column, resolver)
    return _clustering(table, by_column, resolver, partitions)


def _column(table: TableSchema, name: str) -> Column:
    try:
        return table.column(name)
    except KeyError:
        raise InvalidRequestError(f"Undefined column name {name}") from None


def _values(relation: ast.Relation, column: Column, resolver: Resolver) -> list[Any]:
    if relation.op == "in":
        assert isinstance(relation.value, ast.TupleTerm)
        values = [resolver.value(t, column.type, column.name) for t in relation.value.items]
    else:
        values = [resolver.value(relation.value, column.type, column.name)]
    for value in values:
        if value is None:
            raise InvalidRequestError(f"Invalid null value in condition for column {column.name}")
    return list(dict.fromkeys(values))


def _partition_keys(
    table: TableSchema, by_column: dict[str, list[ast.Relation]], resolver: Resolver
) -> tuple[tuple[Any, ...], ...]:
    missing = [c.name for c in table.partition_key if c.name not in by_column]
    if missing:
        raise InvalidRequestError(f"Some partition key parts are missing: {', '.join(missing)}")
    choices: list[list[Any]] = []
    for column in table.partition_key:
        relations = by_column.pop(column.name)
        if len(relations) > 1 or relations[0].is_tuple or relations[0].op not in ("=", "in"):
            raise InvalidRequestError(
                f"Only EQ and IN relation are supported on the partition key (unless you use the token()"
                f" function) for column {column.name}"
            )
        choices.append(_values(relations[0], column, resolver))
    return tuple(itertools.product(*choices))


def _clustering(
    table: TableSchema,
    by_column: dict[str, list[ast.Relation]],
    resolver: Resolver,
    partitions: tuple[tuple[Any, ...], ...],
) -> Selection:
    columns = table.clustering_key
    prefixes: list[tuple[Any, ...]] = [()]
    position = 0
    while position < len(columns) and columns[position].name in by_column:
        relations = by_column[columns[position].name]
        if any(r.op not in ("=", "in") for r in relations):
            break
        by_column.pop(columns[position].name)
        if len(relations) > 1:
            raise InvalidRequestError(f"{columns[position].name} cannot be restricted by more than one relation")
        relation = relations[0]
        width = len(relation.columns)
        _check_tuple_columns(relation, columns[position : position + width])
        prefixes = [p + v for p in prefixes for v in _tuple_values(relation, columns[position:], resolver)]
        position += width
    ranges: list[ClusteringRange] = []
    sliced = position < len(columns) and columns[position].name in by_column
    if sliced:
        slices = by_column.pop(columns[position].name)
        for prefix in prefixes:
            rng = _slice_range(prefix, slices, columns[position:], resolver)
            if not is_empty(rng, columns):
                ranges.append(rng)
    elif position < len(columns) and position > 0:
        ranges = [ClusteringRange(Bound(p, True), Bound(p, True)) for p in prefixes]
    if by_column:
        name = next(iter(by_column))
        previous = columns[position].name if position < len(columns) else columns[-1].name
        raise InvalidRequestError(
            f'PRIMARY KEY column "{name}" cannot be restricted as preceding column "{previous}" is not'
            " restricted or is restricted by a non-EQ relation"
        )
    if position == len(columns) and columns:
        return Selection(partitions, rows=tuple(prefixes), has_clustering=True)
    return Selection(partitions, ranges=tuple(ranges), has_clustering=position > 0 or sliced)


def _check_tuple_columns(relation: ast.Relation, expected: Sequence[Column]) -> None:
    names = [c.name for c in expected]
    if list(relation.columns) != names[: len(relation.columns)] or len(relation.columns) > len(names):
        raise InvalidRequestError(
            f"Clustering columns must appear in the PRIMARY KEY order in multi-column relations:"
            f" ({', '.join(relation.columns)})"
        )


def _tuple_values(relation: ast.Relation, columns: Sequence[Column], resolver: Resolver) -> list[tuple[Any, ...]]:
    if not relation.is_tuple:
        return [(v,) for v in _values(relation, columns[0], resolver)]
    width = len(relation.columns)
    alternatives = relation.value.items if relation.op == "in" else (relation.value,)  # type: ignore[union-attr]
    result: list[tuple[Any, ...]] = []
    for alternative in alternatives:
        result.append(_tuple_term(alternative, columns[:width], resolver))
    return list(dict.fromkeys(result))


def _tuple_term(term: ast.Term, columns: Sequence[Column], resolver: Resolver) -> tuple[Any, ...]:
    if not isinstance(term, ast.TupleTerm) or len(term.items) != len(columns):
        raise InvalidRequestError(
            f"Expected {len(columns)} elements in value tuple for ({', '.join(c.name for c in columns)})"
        )
    values = tuple(resolver.value(t, c.type, c.name) for t, c in zip(term.items, columns, strict=True))
    if any(v is None for v in values):
        raise InvalidRequestError("Invalid null value in condition for a clustering column")
    return values


def _slice_range(
    prefix: tuple[Any, ...], slices: list[ast.Relation], columns: Sequence[Column], resolver: Resolver
) -> ClusteringRange:
    lower: Bound | None = None
    upper: Bound | None = None
    for relation in slices:
        if relation.op in ("=", "in"):
            raise InvalidRequestError(f"{relation.columns[0]} cannot be restricted by both an equality and a slice")
        width = len(relation.columns)
        _check_tuple_columns(relation, columns[:width])
        if relation.is_tuple:
            values = _tuple_term(relation.value, columns[:width], resolver)
        else:
            values = tuple(_values(relation, columns[0], resolver))
        if any(c.descending for c in columns[:width]) and width > 1:
            raise UnsupportedCqlError("a multi-column slice over DESC clustering columns")
        bound = Bound(prefix + values, relation.op in ("<=", ">="))
        if relation.op in (">", ">="):
            if lower is not None:
                raise InvalidRequestError(
                    f"More than one restriction was found for the start bound on {columns[0].name}"
                )
            lower = bound
        else:
            if upper is not None:
                raise InvalidRequestError(f"More than one restriction was found for the end bound on {columns[0].name}")
            upper = bound
    if columns[0].descending:
        lower, upper = upper, lower
    return ClusteringRange(lower or Bound(prefix, True), upper or Bound(prefix, True))
