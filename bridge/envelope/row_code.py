"""Keys and row structs (`before` / `after`) of log rows, by code generated once per table plan.

The cell rule of the legacy format (connector.md 2.6), written once (`_cell_lines`), for each
static/regular column `X` of a row:

- `X` has a value -> `{"value": v}`;
- otherwise `cdc$deleted_X` is true -> `{"value": null}` (set to null, `DELETE X`, INSERT null);
- otherwise `null` in a delta row (not touched) and a pre-image (not part of the image, which
  has only the changed columns with `'preimage': true`), `{"value": null}` in a post-image
  (the whole row after the change).

A delta row's non-frozen collection or UDT column gives its cell and its element change
(`bridge.envelope.elements`, companion field `X__elements`). An image covers the columns of its
row's kind only (static columns for the static row, regular ones for a clustered row); the
others, and every `__elements` field, are `null`. Key columns are plain values; the row structs
reuse the converted key.

Why code is generated: doing this column by column in a loop costs a tuple unpack and a few
branches per column and record; one straight-line function per table and row kind does the same
work (the technique `dataclasses` uses for `__init__`). Column names only appear as string
literals (`repr`), converters are passed in by name, nothing of the schema becomes code. Each
conversion sits in a `try` that costs nothing (Python 3.11+) until a value does not fit; the
`ValueConversionError` then names the column. For a table `(pk int, ck int, v text)` the delta
builder reads::

    def build(values, key):
        get = values.get
        v0 = key['ck']
        v1 = key['pk']
        value = get('v')
        if value is not None:
            try:
                v2 = {'value': value if value.__class__ is str else convert_2(value)}
            except CONVERSION_ERRORS as error:
                raise in_column('v', error) from None
        elif get('cdc$deleted_v'):
            v2 = {'value': None}
        else:
            v2 = None
        return {'ck': v0, 'pk': v1, 'v': v2}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bridge.envelope.elements import MultiCellMapping, delta_cells, overwrite_cell
from bridge.envelope.errors import ValueConversionError
from bridge.envelope.types import Converter, unchanged_when

# A converter refuses bad values with ValueConversionError; a driver object of an unexpected
# shape can also break it with one of these. Either way the column is named in the error.
CONVERSION_ERRORS = (ValueConversionError, TypeError, ValueError, AttributeError, KeyError, IndexError)


@dataclass(frozen=True, slots=True)
class KeyColumnPlan:
    name: str
    convert: Converter


@dataclass(frozen=True, slots=True)
class ValueColumnPlan:
    """A static or regular column: its cell, and for multi-cell types its element changes."""

    name: str
    deleted_column: str
    convert: Converter  # full value (log representation) -> cell value
    static: bool = False
    multi_cell: MultiCellMapping | None = None
    elements_field: str | None = None
    deleted_elements_column: str | None = None

    def delta_cells(self, values: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(cell, element change) of this multi-cell column in a delta row."""
        assert self.multi_cell is not None and self.deleted_elements_column is not None
        columns = (self.name, self.deleted_column, self.deleted_elements_column)
        return delta_cells(self.multi_cell, self.convert, columns, values)

    def overwrite_cell(self, value: Any, removed: Any) -> dict[str, Any]:
        assert self.multi_cell is not None
        return overwrite_cell(self.multi_cell, self.convert, value, removed)


ColumnPlan = KeyColumnPlan | ValueColumnPlan
RowKind = Literal["delta", "pre", "post"]

KeyBuilder = Callable[[Mapping[str, Any]], dict[str, Any]]
RowBuilder = Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]]
ImageBuilder = Callable[[Mapping[str, Any], dict[str, Any], bool], dict[str, Any]]


def in_column(name: str, error: Exception) -> ValueConversionError:
    detail = str(error) if isinstance(error, ValueConversionError) else f"{type(error).__name__}: {error}"
    return ValueConversionError(f"column {name!r}: {detail}")


def _converted(index: int, convert: Converter) -> str:
    """The expression converting `value` with `convert_<index>`; when the converter is known to
    return common values unchanged (text, ints, booleans), those skip the call."""
    unchanged = unchanged_when(convert)
    if unchanged is None:
        return f"convert_{index}(value)"
    return f"value if {unchanged} else convert_{index}(value)"


def _guarded(name: str, statement: str, indent: str) -> list[str]:
    """`statement` with a failed conversion reported as a ValueConversionError naming `name`."""
    return [
        f"{indent}try:",
        f"{indent}    {statement}",
        f"{indent}except CONVERSION_ERRORS as error:",
        f"{indent}    raise in_column({name!r}, error) from None",
    ]


def _cell_lines(local: str, column: ValueColumnPlan, index: int, post_image: bool, indent: str) -> list[str]:
    """The cell rule (module docstring) of one column as code assigning `local`."""
    lines = [f"{indent}value = get({column.name!r})", f"{indent}if value is not None:"]
    lines += _guarded(column.name, f"{local} = {{'value': {_converted(index, column.convert)}}}", indent + "    ")
    if post_image:
        return [*lines, f"{indent}else:", f"{indent}    {local} = {{'value': None}}"]
    return [
        *lines,
        f"{indent}elif get({column.deleted_column!r}):",
        f"{indent}    {local} = {{'value': None}}",
        f"{indent}else:",
        f"{indent}    {local} = None",
    ]


def _multi_cell_lines(local: str, column: ValueColumnPlan, index: int) -> list[str]:
    """`ValueColumnPlan.delta_cells` in line, assigning `local` and `<local>_elements`: the two
    calls and the tuple it costs were a fifth of a delta row's translation with two collections."""
    assert column.deleted_elements_column is not None
    added_expression = f"None if value is None else added_{index}(value)"
    removed_expression = f"None if removed is None else removed_{index}(removed)"
    return [
        f"    value = get({column.name!r})",
        f"    removed = get({column.deleted_elements_column!r})",
        f"    if get({column.deleted_column!r}):",
        *_guarded(column.name, f"{local} = overwrite_{index}(value, removed)", "        "),
        f"        {local}_elements = None",
        "    elif value is None and removed is None:",
        f"        {local} = {local}_elements = None",
        "    else:",
        f"        {local} = None",
        *_guarded(column.name, f"{local}_elements = {{'added': {added_expression}, 'removed': {removed_expression}}}",
                  "        "),
    ]


def _compile(source: list[str], namespace: dict[str, Any], label: str) -> Any:
    namespace.update(CONVERSION_ERRORS=CONVERSION_ERRORS, in_column=in_column)
    # our generator's text; column names only appear as repr() literals (module docstring)
    exec(compile("\n".join(source) + "\n", label, "exec"), namespace)  # noqa: S102
    return namespace["build"]


def row_source(columns: Sequence[ColumnPlan], kind: RowKind) -> tuple[list[str], dict[str, Any]]:
    """The source of the `kind` row builder of `columns` (row struct order) and the names it
    uses: `build(values, key)` for deltas, `build(values, key, static_row)` for images."""
    image = kind != "delta"
    lines = ["def build(values, key, static_row):" if image else "def build(values, key):", "    get = values.get"]
    namespace: dict[str, Any] = {}
    fields: list[str] = []
    for index, column in enumerate(columns):
        local = f"v{index}"
        fields.append(f"{column.name!r}: {local}")
        if isinstance(column, KeyColumnPlan):
            lines.append(f"    {local} = key[{column.name!r}]")
            continue
        namespace[f"convert_{index}"] = column.convert
        if image:
            # a column of the other row kind is not part of this image
            lines += [f"    if static_row is not {column.static}:", f"        {local} = None", "    else:"]
            lines += _cell_lines(local, column, index, kind == "post", "        ")
        elif column.multi_cell is None:
            lines += _cell_lines(local, column, index, False, "    ")
        else:
            namespace[f"overwrite_{index}"] = column.overwrite_cell
            namespace[f"added_{index}"] = column.multi_cell.added
            namespace[f"removed_{index}"] = column.multi_cell.removed
            lines += _multi_cell_lines(local, column, index)
        if column.elements_field is not None:
            fields.append(f"{column.elements_field!r}: " + ("None" if image else f"{local}_elements"))
    lines.append("    return {" + ", ".join(fields) + "}")
    return lines, namespace


def compile_row_builder(table: str, columns: Sequence[ColumnPlan], kind: RowKind) -> Any:
    """The row builder (`RowBuilder` for deltas, `ImageBuilder` for images) of a table."""
    source, namespace = row_source(columns, kind)
    return _compile(source, namespace, f"<{kind} row builder of {table}>")


def compile_key_builder(table: str, columns: Sequence[KeyColumnPlan]) -> KeyBuilder:
    """`build(values)`: the struct of `columns` (in order), each converted; null stays null."""
    lines = ["def build(values):", "    get = values.get"]
    namespace: dict[str, Any] = {}
    fields = []
    for index, column in enumerate(columns):
        namespace[f"convert_{index}"] = column.convert
        lines.append(f"    value = get({column.name!r})")
        statement = f"v{index} = None if value is None else {_converted(index, column.convert)}"
        lines += _guarded(column.name, statement, "    ")
        fields.append(f"{column.name!r}: v{index}")
    lines.append("    return {" + ", ".join(fields) + "}")
    builder: KeyBuilder = _compile(lines, namespace, f"<key builder of {table}>")
    return builder
