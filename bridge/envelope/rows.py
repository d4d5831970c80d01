"""Row structs (`before` / `after`) and keys built from one log row's values.

Cell rules of the legacy format (connector.md 2.6), for each static/regular column `X`:

- delta row: `X` has a value -> `{"value": v}`; `cdc$deleted_X` is true -> `{"value": null}`;
  otherwise `null` (not touched). Non-frozen collections/UDTs: see `bridge.envelope.elements`.
- pre-image row: a column the image includes -> a cell (`{"value": null}` when the image marks it
  null with `cdc$deleted_X`); a column it leaves out -> `null`.
- post-image row: the full row after the change, so every column is a cell.

Key columns are plain values. Any value that does not fit its column raises
`ValueConversionError` naming the column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bridge.envelope.errors import ValueConversionError
from bridge.envelope.plan import KEY_SLOT, MULTI_CELL_SLOT, KeySlot, TablePlan, ValueColumnPlan
from bridge.envelope.types import hashable_form

# A converter refuses bad values with ValueConversionError; a driver object of an unexpected
# shape can also break it with one of these. Either way the column is named in the error.
CONVERSION_ERRORS = (ValueConversionError, TypeError, ValueError, AttributeError, KeyError, IndexError)


def _in_column(name: str, error: Exception) -> ValueConversionError:
    detail = str(error) if isinstance(error, ValueConversionError) else f"{type(error).__name__}: {error}"
    return ValueConversionError(f"column {name!r}: {detail}")


def row_key(plan: TablePlan, values: Mapping[str, Any]) -> dict[str, Any]:
    """The key struct of a log row (the plan's generated builder; the loop below names the
    column of a value that does not fit)."""
    try:
        return plan.key_builder(values)
    except CONVERSION_ERRORS:
        return key_struct(plan.key_slots, values)


def key_struct(key_slots: tuple[KeySlot, ...], values: Mapping[str, Any]) -> dict[str, Any]:
    key: dict[str, Any] = {}
    get = values.get
    name = ""
    try:
        for name, convert in key_slots:
            value = get(name)
            key[name] = None if value is None else convert(value)
        return key
    except CONVERSION_ERRORS as error:
        raise _in_column(name, error) from None


def delta_struct(plan: TablePlan, values: Mapping[str, Any], key: dict[str, Any]) -> dict[str, Any]:
    """The row struct of a delta row (`after` of inserts/updates, `before` of plain deletes);
    `key` is the row's converted key struct, whose values the key columns reuse. Runs the
    plan's generated builder; on a value that does not fit, the column-by-column loop below
    finds and names the column."""
    try:
        return plan.delta_builder(values, key)
    except CONVERSION_ERRORS:
        return _delta_struct_by_column(plan, values, key)


def _delta_struct_by_column(plan: TablePlan, values: Mapping[str, Any], key: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    get = values.get
    name = ""
    try:
        for kind, name, convert, deleted, column_plan in plan.row_slots:
            if kind == KEY_SLOT:
                row[name] = key[name]
                continue
            value = get(name)
            if kind == MULTI_CELL_SLOT:
                assert isinstance(column_plan, ValueColumnPlan) and column_plan.elements_field is not None
                row[name], row[column_plan.elements_field] = column_plan.delta_cells(values)
            elif value is not None:
                row[name] = {"value": convert(value)}
            elif get(deleted):
                row[name] = {"value": None}
            else:
                row[name] = None
        return row
    except CONVERSION_ERRORS as error:
        raise _in_column(name, error) from None


def _is_static_row(plan: TablePlan, values: Mapping[str, Any]) -> bool:
    """An image of the static row: a clustered table's row with every clustering column null."""
    names = plan.clustering_names
    return bool(names) and all(values.get(name) is None for name in names)


def image_struct(plan: TablePlan, values: Mapping[str, Any], key: dict[str, Any], full: bool) -> dict[str, Any]:
    """The row struct of a pre-image (`full=False`) or post-image (`full=True`) row. An image
    covers the columns of its row's kind only (static columns for the static row, regular ones
    for a clustered row); the others are not part of it and stay null."""
    static_row = _is_static_row(plan, values)
    row: dict[str, Any] = {}
    get = values.get
    name = ""
    try:
        for kind, name, convert, deleted, column_plan in plan.row_slots:
            if kind == KEY_SLOT:
                row[name] = key[name]  # an image has the key of its delta row
                continue
            value = get(name)
            assert isinstance(column_plan, ValueColumnPlan)
            if column_plan.static != static_row:
                row[name] = None
            elif value is not None:
                row[name] = {"value": convert(value)}
            elif full or get(deleted):
                row[name] = {"value": None}
            else:
                row[name] = None
            if column_plan.elements_field is not None:
                row[column_plan.elements_field] = None
        return row
    except CONVERSION_ERRORS as error:
        raise _in_column(name, error) from None


def row_identity(plan: TablePlan, values: Mapping[str, Any]) -> tuple[Any, ...]:
    """What pairs a delta row with its images inside a record: the primary key values
    (clustering columns null for the static row)."""
    return tuple(hashable_form(values.get(name)) for name, _ in plan.key_slots)
