"""The advanced format's row structs, modified-column sets and key headers, by code generated once
per table plan (the technique of `bridge.envelope.row_code`, whose module docstring says why).

The connector's rules (`ScyllaChangeRecordEmitter`, scylla-cdc-source-connector 74d336e), each
one generated function per table and struct (`before` or `after`, with or without key columns):

- full image (`fillStructWithFullImage`): every column of the image row as a plain value, null
  when the image has none; key columns (when placed in this struct) from the converted key;
- only updated (`fillStructWithOnlyUpdatedColumns`): the image's values of the modified columns
  only, every other column null;
- update `before` from both images (`fillBeforeStructForUpdate`): modified columns from the
  pre-image, the others from the post-image;
- modified columns (`getModifiedColumns`): a non-key column whose delta value is not null, or
  whose `cdc$deleted_<col>` is true, or whose `cdc$deleted_elements_<col>` is not null;
- headers (`buildPkHeaders`): `pk.<col>` / `ck.<col>` for each non-null key column, in the log's
  column order, the UTF-8 of `String.valueOf` (`bridge.envelope.java_string`).

A non-frozen collection or UDT column is its full value (an image holds the whole collection;
a non-frozen list arrives as `map<timeuuid, V>` and becomes its values in key order); an empty
collection is null. For a table `(pk int, v text)` with the key placed in the struct, the full
image builder reads::

    def build(values, key):
        get = values.get
        value = get('v')
        if value is None:
            v1 = None
        else:
            try:
                v1 = value if value.__class__ is str else convert_1(value)
            except CONVERSION_ERRORS as error:
                raise in_column('v', error) from None
        return {'pk': key['pk'], 'v': v1}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.envelope.connect_schema import ConnectSchema
from bridge.envelope.java_string import java_string
from bridge.envelope.row_code import CONVERSION_ERRORS, in_column
from bridge.envelope.types import Converter, unchanged_when

FullBuilder = Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]]
OnlyUpdatedBuilder = Callable[[Mapping[str, Any], dict[str, Any], frozenset[str]], dict[str, Any]]
MergedBuilder = Callable[[Mapping[str, Any], Mapping[str, Any], dict[str, Any], frozenset[str]], dict[str, Any]]
ModifiedColumns = Callable[[Mapping[str, Any]], frozenset[str]]
HeaderBuilder = Callable[[dict[str, Any]], tuple[tuple[str, bytes], ...]]


@dataclass(frozen=True, slots=True)
class StructColumn:
    """One field of `before`/`after`: a key column (value taken from the converted key) or a
    value column (converted from the image row; `deleted` / `deleted_elements` name its log
    columns for the modified-column rule)."""

    name: str
    key: bool
    convert: Converter | None = None
    deleted: str = ""
    deleted_elements: str | None = None


@dataclass(frozen=True, slots=True)
class HeaderColumn:
    name: str
    prefix: str  # "pk." or "ck."
    schema: ConnectSchema


def _converted(index: int, convert: Converter) -> str:
    unchanged = unchanged_when(convert)
    if unchanged is None:
        return f"convert_{index}(value)"
    return f"value if {unchanged} else convert_{index}(value)"


def _value_lines(local: str, column: StructColumn, index: int, read: str) -> list[str]:
    """`local` = the converted value of `read` (an expression giving the log value), or None."""
    assert column.convert is not None
    return [
        f"    value = {read}",
        "    if value is None:",
        f"        {local} = None",
        "    else:",
        "        try:",
        f"            {local} = {_converted(index, column.convert)}",
        "        except CONVERSION_ERRORS as error:",
        f"            raise in_column({column.name!r}, error) from None",
    ]


def _compile(lines: list[str], namespace: dict[str, Any], label: str) -> Any:
    namespace.update(CONVERSION_ERRORS=CONVERSION_ERRORS, in_column=in_column)
    # our generator's text; column names only appear as repr() literals (module docstring)
    exec(compile("\n".join(lines) + "\n", label, "exec"), namespace)  # noqa: S102
    return namespace["build"]


def _struct_source(columns: Sequence[StructColumn], header: str,
                   read: Callable[[StructColumn], str]) -> tuple[list[str], dict[str, Any]]:
    lines = [header]
    namespace: dict[str, Any] = {}
    fields: list[str] = []
    for index, column in enumerate(columns):
        if column.key:
            fields.append(f"{column.name!r}: key[{column.name!r}]")
            continue
        assert column.convert is not None
        namespace[f"convert_{index}"] = column.convert
        lines += _value_lines(f"v{index}", column, index, read(column))
        fields.append(f"{column.name!r}: v{index}")
    lines.append("    return {" + ", ".join(fields) + "}")
    return lines, namespace


def compile_full(table: str, columns: Sequence[StructColumn], label: str) -> FullBuilder:
    """`build(image_values, key)`: the struct of a whole image."""
    lines, namespace = _struct_source(columns, "def build(values, key):\n    get = values.get",
                                      lambda c: f"get({c.name!r})")
    builder: FullBuilder = _compile(lines, namespace, f"<{label} full image builder of {table}>")
    return builder


def compile_only_updated(table: str, columns: Sequence[StructColumn], label: str) -> OnlyUpdatedBuilder:
    """`build(image_values, key, modified)`: the image's values of the modified columns only."""
    lines, namespace = _struct_source(
        columns, "def build(values, key, modified):\n    get = values.get",
        lambda c: f"get({c.name!r}) if {c.name!r} in modified else None")
    builder: OnlyUpdatedBuilder = _compile(lines, namespace, f"<{label} only-updated builder of {table}>")
    return builder


def compile_merged(table: str, columns: Sequence[StructColumn], label: str) -> MergedBuilder:
    """`build(pre_values, post_values, key, modified)`: modified columns from the pre-image, the
    others from the post-image."""
    lines, namespace = _struct_source(
        columns, "def build(pre, post, key, modified):\n    pre_get = pre.get\n    post_get = post.get",
        lambda c: f"(pre_get if {c.name!r} in modified else post_get)({c.name!r})")
    builder: MergedBuilder = _compile(lines, namespace, f"<{label} merged builder of {table}>")
    return builder


def compile_modified(table: str, columns: Sequence[StructColumn]) -> ModifiedColumns:
    """`build(delta_values)`: the names of the non-key columns the delta modified."""
    lines = ["def build(values):", "    get = values.get", "    out = []"]
    for column in columns:
        if column.key:
            continue
        test = f"get({column.name!r}) is not None or get({column.deleted!r})"
        if column.deleted_elements is not None:
            test += f" or get({column.deleted_elements!r}) is not None"
        lines += [f"    if {test}:", f"        out.append({column.name!r})"]
    lines.append("    return frozenset(out)")
    builder: ModifiedColumns = _compile(lines, {}, f"<modified columns of {table}>")
    return builder


def compile_headers(table: str, columns: Sequence[HeaderColumn]) -> HeaderBuilder:
    """`build(key)`: the key headers of a converted key struct (module docstring)."""
    lines = ["def build(key):", "    out = []"]
    namespace: dict[str, Any] = {"java_string": java_string}
    for index, column in enumerate(columns):
        namespace[f"schema_{index}"] = column.schema
        name = column.prefix + column.name
        lines += [
            f"    value = key[{column.name!r}]",
            "    if value is not None:",
            f"        out.append(({name!r}, java_string(value, schema_{index}).encode()))",
        ]
    lines.append("    return tuple(out)")
    builder: HeaderBuilder = _compile(lines, namespace, f"<key headers of {table}>")
    return builder
