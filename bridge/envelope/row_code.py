"""The generated builder of delta-row structs, compiled once per table plan.

A delta row becomes `after` (or the `before` of a plain delete) by the cell rules of
`bridge.envelope.rows`. Doing that column by column in a loop costs a tuple unpack and a few
branches per column and record; the builder generated here does the same with one straight-line
function per table (the technique `dataclasses` uses for `__init__`). Column names only appear as
string literals (`repr`), converters are passed in by name, nothing of the schema becomes code.

For a table `(pk int, ck int, v text)` the source reads::

    def build(values, key):
        get = values.get
        v0 = key['ck']
        v1 = key['pk']
        value = get('v')
        if value is not None:
            v2 = {'value': value if value.__class__ is str else convert_2(value)}
        elif get('cdc$deleted_v'):
            v2 = {'value': None}
        else:
            v2 = None
        return {'ck': v0, 'pk': v1, 'v': v2}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bridge.envelope.types import unchanged_when

RowBuilder = Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]]

# What the generator needs of a column, in row order:
#   ("key", name) | ("atomic", name, cdc$deleted_ name, converter)
#   | ("multi", name, elements field name, values -> (cell, elements))
ColumnCode = tuple[Any, ...]


def _converted(index: int, convert: Callable[[Any], Any]) -> str:
    """The expression converting `value` with `convert_<index>`; when the converter is known to
    return common values unchanged (text, ints, booleans), those skip the call."""
    unchanged = unchanged_when(convert)
    if unchanged is None:
        return f"convert_{index}(value)"
    return f"value if {unchanged} else convert_{index}(value)"


def builder_source(columns: list[ColumnCode]) -> tuple[str, dict[str, Any]]:
    """The source of `build(values, key)` and the names it refers to."""
    lines = ["def build(values, key):", "    get = values.get"]
    namespace: dict[str, Any] = {}
    fields: list[str] = []
    for index, column in enumerate(columns):
        kind, name = column[0], column[1]
        local = f"v{index}"
        if kind == "key":
            lines.append(f"    {local} = key[{name!r}]")
        elif kind == "atomic":
            deleted, convert = column[2], column[3]
            namespace[f"convert_{index}"] = convert
            lines += [
                f"    value = get({name!r})",
                "    if value is not None:",
                f"        {local} = {{'value': {_converted(index, convert)}}}",
                f"    elif get({deleted!r}):",
                f"        {local} = {{'value': None}}",
                "    else:",
                f"        {local} = None",
            ]
        else:
            elements_field, cells = column[2], column[3]
            namespace[f"cells_{index}"] = cells
            lines.append(f"    {local}, {local}_elements = cells_{index}(values)")
            fields.append(f"{name!r}: {local}")
            fields.append(f"{elements_field!r}: {local}_elements")
            continue
        fields.append(f"{name!r}: {local}")
    lines.append("    return {" + ", ".join(fields) + "}")
    return "\n".join(lines) + "\n", namespace


def compile_builder(table: str, columns: list[ColumnCode]) -> RowBuilder:
    source, namespace = builder_source(columns)
    exec(compile(source, f"<delta row builder of {table}>", "exec"), namespace)
    builder: RowBuilder = namespace["build"]
    return builder


KeyBuilder = Callable[[Mapping[str, Any]], dict[str, Any]]


def compile_key_builder(table: str, key_columns: list[tuple[str, Callable[[Any], Any]]]) -> KeyBuilder:
    """`key(values)`: the key struct, each column converted (null stays null)."""
    lines = ["def key(values):", "    get = values.get"]
    namespace: dict[str, Any] = {}
    fields = []
    for index, (name, convert) in enumerate(key_columns):
        namespace[f"convert_{index}"] = convert
        lines.append(f"    value = get({name!r})")
        lines.append(f"    v{index} = None if value is None else {_converted(index, convert)}")
        fields.append(f"{name!r}: v{index}")
    lines.append("    return {" + ", ".join(fields) + "}")
    exec(compile("\n".join(lines) + "\n", f"<key builder of {table}>", "exec"), namespace)
    builder: KeyBuilder = namespace["key"]
    return builder
