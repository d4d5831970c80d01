"""Non-frozen collections and UDTs ("multi-cell" columns): full values and element-level changes.

A delta row shows a multi-cell column `X` through three log columns (cdc-log-format.md 3.3):
`X` (added elements / assigned fields), `cdc$deleted_X` (the whole collection was cleared) and
`cdc$deleted_elements_X` (removed keys / field indices). The translator turns them into:

- an overwrite (`cdc$deleted_X = true`): the cell `{"value": <full new value>}` of the column,
  minus any elements removed in the same write (`{"value": null}` when nothing is left);
- an element-level change (no `cdc$deleted_X`): the column's cell stays `null` (a consumer that
  only knows cells sees "untouched", never an overwrite) and the companion field
  `<X>__elements` carries a typed struct `<prefix>.<ks>.<table>.<X>.Elements` with
  `added` and `removed`:

- set<E>: `added` array<E> (elements added), `removed` array<E> (elements removed);
- map<K,V>: `added` array<MapEntry_K_V {key, value}> (entries put), `removed` array<K> (keys);
- list<V>: `added` array<MapEntry_TIMEUUID_V> (cells put, keyed by their list key as timeuuid
  text, in list order), `removed` array<string> (list keys removed);
- UDT: `added` the UDT struct with the assigned fields (others null), `removed` array<string>
  (names of the fields set to null).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass
from typing import Any

from bridge.envelope import connect_schema as cs
from bridge.envelope.errors import ValueConversionError
from bridge.envelope.names import SchemaNames
from bridge.envelope.types import (
    Converter,
    TypeMapping,
    list_key_order,
    list_values_of_keyed,
    map_type,
    udt_fields,
)
from bridge.scylla.schema import CqlType, scalar
from bridge.scylla.values import canonical

ELEMENTS_SUFFIX = "__elements"

Remover = Callable[[Any, Any], Any]


@dataclass(frozen=True, slots=True)
class MultiCellMapping:
    """How one non-frozen collection/UDT column is carried.

    `value` maps the log representation of a full value (images, overwrites) to its cell value;
    `added` / `removed` build the typed element change from `X` / `cdc$deleted_elements_X`;
    `without` drops removed keys from a full log value."""

    value: TypeMapping
    elements_schema: cs.ConnectSchema
    added: Converter
    removed: Converter
    without: Remover


def _keys(value: Any) -> list[Any]:
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise ValueConversionError(f"expected a set of element keys, got {type(value).__name__} {value!r:.80}")
    return list(value)


def _elements_struct(name: str, added: cs.ConnectSchema, removed: cs.ConnectSchema) -> cs.ConnectSchema:
    fields = [cs.ConnectField("added", added), cs.ConnectField("removed", removed)]
    return cs.struct(name, fields, True)


def _set_mapping(cql: CqlType, prefix: SchemaNames, elements_name: str) -> MultiCellMapping:
    element = map_type(cql.params[0], prefix)
    full = map_type(cql.as_frozen(), prefix)
    schema = _elements_struct(elements_name, cs.array(element.schema), cs.array(element.schema))

    def without(value: Any, removed: Any) -> Any:
        gone = {canonical(k) for k in _keys(removed)}
        return [item for item in _keys(value) if canonical(item) not in gone]

    return MultiCellMapping(full, schema, full.convert, full.convert, without)


def _map_mapping(cql: CqlType, prefix: SchemaNames, elements_name: str) -> MultiCellMapping:
    key = map_type(cql.params[0], prefix)
    full = map_type(cql.as_frozen(), prefix)
    schema = _elements_struct(elements_name, full.schema, cs.array(key.schema))
    convert_key = key.convert

    def removed(value: Any) -> list[Any]:
        return [convert_key(k) for k in _keys(value)]

    def without(value: Any, gone_keys: Any) -> Any:
        gone = {canonical(k) for k in _keys(gone_keys)}
        return {k: v for k, v in value.items() if canonical(k) not in gone}

    return MultiCellMapping(full, schema, full.convert, removed, without)


def _list_mapping(cql: CqlType, prefix: SchemaNames, elements_name: str) -> MultiCellMapping:
    element = map_type(cql.params[0], prefix)
    keyed = map_type(CqlType("map", (scalar("timeuuid"), cql.params[0]), frozen=True), prefix)
    full = TypeMapping(cs.array(element.schema), list_values_of_keyed(element))
    schema = _elements_struct(elements_name, keyed.schema, cs.array(cs.primitive(cs.STRING)))
    convert_entries = keyed.convert

    def added(value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, Mapping):
            raise ValueConversionError(f"expected map<timeuuid, V> of a list, got {type(value).__name__}")
        return convert_entries(dict(sorted(value.items(), key=lambda kv: list_key_order(kv[0]))))  # type: ignore[no-any-return]

    def removed(value: Any) -> list[str]:
        return [str(k) for k in sorted(_keys(value), key=list_key_order)]

    def without(value: Any, gone_keys: Any) -> Any:
        gone = set(_keys(gone_keys))
        return {k: v for k, v in value.items() if k not in gone}

    return MultiCellMapping(full, schema, added, removed, without)


def _udt_mapping(cql: CqlType, prefix: SchemaNames, elements_name: str) -> MultiCellMapping:
    full = map_type(cql.as_frozen(), prefix)
    schema = _elements_struct(elements_name, full.schema, cs.array(cs.primitive(cs.STRING)))
    names = cql.field_names

    def field_name(index: Any) -> str:
        if type(index) is not int or not 0 <= index < len(names):
            raise ValueConversionError(f"UDT {cql.udt_name} has no field index {index!r}")
        return names[index]

    def removed(value: Any) -> list[str]:
        return [field_name(i) for i in sorted(_keys(value))]

    def without(value: Any, gone_indices: Any) -> Any:
        gone = {field_name(i) for i in _keys(gone_indices)}
        return tuple(None if n in gone else v for n, v in zip(names, udt_fields(value, names), strict=True))

    return MultiCellMapping(full, schema, full.convert, removed, without)


def map_multi_cell(cql: CqlType, prefix: SchemaNames, column: str) -> MultiCellMapping:
    """The mapping of a non-frozen collection or UDT column `column` of type `cql`."""
    elements_name = prefix.of(f"{column}.Elements")
    if cql.kind == "set":
        return _set_mapping(cql, prefix, elements_name)
    if cql.kind == "map":
        return _map_mapping(cql, prefix, elements_name)
    if cql.kind == "list":
        return _list_mapping(cql, prefix, elements_name)
    if cql.kind == "udt":
        return _udt_mapping(cql, prefix, elements_name)
    raise ValueConversionError(f"{cql.cql()} is not a non-frozen collection or UDT")


def overwrite_cell(multi: MultiCellMapping, convert: Converter, value: Any, removed: Any) -> dict[str, Any]:
    """The cell of a multi-cell column the write cleared (`cdc$deleted_X`): what the write put in
    (`value`) is the whole new value, less the elements it removed in the same write."""
    if value is not None and removed:
        value = multi.without(value, removed)
    if isinstance(value, Sized) and len(value) == 0:
        value = None  # an empty non-frozen collection is null in Scylla
    return {"value": None if value is None else convert(value)}


def delta_cells(
    multi: MultiCellMapping,
    convert: Converter,
    columns: tuple[str, str, str],
    values: Mapping[str, Any],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(cell, element change) of a multi-cell column in a delta row; `columns` are the names of
    the column, its `cdc$deleted_` and its `cdc$deleted_elements_` log columns. (The generated
    row builders do the same in line: `row_code._multi_cell_lines`.)"""
    name, deleted, deleted_elements = columns
    value = values.get(name)
    removed = values.get(deleted_elements)
    if values.get(deleted):
        return overwrite_cell(multi, convert, value, removed), None
    if value is None and removed is None:
        return None, None
    return None, {
        "added": None if value is None else multi.added(value),
        "removed": None if removed is None else multi.removed(removed),
    }
