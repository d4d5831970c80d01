"""The columns of `<table>_scylla_cdc_log` derived from a base table (cdc-log-format.md 1.2, 1.3)."""

from __future__ import annotations

from dataclasses import dataclass

from bridge.scylla.schema import CqlType, TableSchema, scalar

STREAM_ID = "cdc$stream_id"
TIME = "cdc$time"
BATCH_SEQ_NO = "cdc$batch_seq_no"
OPERATION = "cdc$operation"
TTL = "cdc$ttl"
END_OF_BATCH = "cdc$end_of_batch"
DELETED_PREFIX = "cdc$deleted_"
DELETED_ELEMENTS_PREFIX = "cdc$deleted_elements_"

METADATA_COLUMNS: tuple[tuple[str, CqlType], ...] = (
    (OPERATION, scalar("tinyint")),
    (TTL, scalar("bigint")),
    (END_OF_BATCH, scalar("boolean")),
)


def deleted_column(name: str) -> str:
    return DELETED_PREFIX + name


def deleted_elements_column(name: str) -> str:
    return DELETED_ELEMENTS_PREFIX + name


def log_value_type(base: CqlType) -> CqlType:
    """The log column type of a base static/regular column: multi-cell types are frozen,
    lists expose their timeuuid keys as `frozen<map<timeuuid, V>>`."""
    if base.kind == "list" and not base.frozen:
        return CqlType("map", (scalar("timeuuid"), base.params[0]), frozen=True)
    return base.as_frozen()


def deleted_elements_type(base: CqlType) -> CqlType | None:
    """The element-key set type for `cdc$deleted_elements_X`, or None for atomic columns."""
    if not base.is_multi_cell:
        return None
    if base.kind == "list":
        key = scalar("timeuuid")
    elif base.kind == "udt":
        key = scalar("smallint")
    else:
        key = base.params[0]
    return CqlType("set", (key,), frozen=True)


@dataclass(frozen=True, slots=True)
class LogColumns:
    """Name and type of every column of a log table, key columns first."""

    partition_key: tuple[tuple[str, CqlType], ...]
    clustering: tuple[tuple[str, CqlType], ...]
    regular: tuple[tuple[str, CqlType], ...]

    @property
    def all(self) -> tuple[tuple[str, CqlType], ...]:
        return self.partition_key + self.clustering + self.regular


def log_columns(table: TableSchema) -> LogColumns:
    regular: list[tuple[str, CqlType]] = list(METADATA_COLUMNS)
    regular += [(c.name, c.type) for c in table.primary_key]
    for column in table.value_columns:
        regular.append((column.name, log_value_type(column.type)))
        regular.append((deleted_column(column.name), scalar("boolean")))
        elements = deleted_elements_type(column.type)
        if elements is not None:
            regular.append((deleted_elements_column(column.name), elements))
    return LogColumns(
        partition_key=((STREAM_ID, scalar("blob")),),
        clustering=((TIME, scalar("timeuuid")), (BATCH_SEQ_NO, scalar("int"))),
        regular=tuple(regular),
    )
