"""ExtractNewRecordState's options, with Debezium's names and defaults (reference/ecosystem.md 2.1).

`delete.tombstone.handling.mode` (Debezium 2.5+) wins when it is set. Otherwise the legacy pair
`delete.handling.mode` (`none` | `drop` | `rewrite`) plus `drop.tombstones` is honoured the way
Debezium 2.5-3.1 did (`LegacyDeleteHandlingStrategy`), because the Java connector's
`ScyllaExtractNewRecordState` ships on Debezium 2.7. For convenience `delete.handling.mode` also
takes the newer names (`tombstone`, `rewrite-with-tombstone`). With neither set the mode is
Debezium's current default, `tombstone`.

`add.fields` / `add.headers` entries follow `FieldReference`: `op`, `ts_ms`, `ts_us`, `ts_ns` come
from the envelope's top level; `id`, `total_order`, `data_collection_order` from `transaction`;
any other bare name from `source`; `struct.field` names its struct (new name
`<prefix><struct>_<field>`); `field:NEW` renames (`<prefix>NEW`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from bridge.spark.core.errors import SparkJobError

TOP_LEVEL_FIELDS = frozenset({"op", "ts_ms", "ts_us", "ts_ns"})
TRANSACTION_FIELDS = frozenset({"id", "total_order", "data_collection_order"})
DELETED_FIELD = "__deleted"

KNOWN_OPTIONS = frozenset({
    "delete.tombstone.handling.mode", "delete.handling.mode", "drop.tombstones", "add.fields",
    "add.fields.prefix", "add.headers", "add.headers.prefix", "cdc.output.format",
})


class DeleteMode(Enum):
    """What happens to deletes and to Debezium's tombstones (ecosystem.md 2.2)."""

    DROP = "drop"
    TOMBSTONE = "tombstone"
    REWRITE = "rewrite"
    REWRITE_WITH_TOMBSTONE = "rewrite-with-tombstone"
    DELETE_TO_TOMBSTONE = "delete-to-tombstone"


@dataclass(frozen=True, slots=True)
class FieldReference:
    """One `add.fields` / `add.headers` entry: where the value comes from and its new name."""

    struct: str | None  # None: the envelope's top level; else "source" or "transaction"
    field: str
    new_name: str

    @classmethod
    def parse(cls, prefix: str, text: str) -> FieldReference:
        parts = text.split(":")
        if len(parts) > 2 or not parts[0]:
            raise SparkJobError(f"add.fields/add.headers: unexpected field name {text!r}")
        path = parts[0].split(".")
        field = path[0] if len(path) == 1 else path[1]
        struct = _struct_of(field) if len(path) == 1 else path[0]
        default_name = field if len(path) == 1 else f"{struct}_{field}"
        new_name = prefix + (parts[1] if len(parts) == 2 else default_name)
        return cls(struct, field, new_name)


def _struct_of(field: str) -> str | None:
    if field in TRANSACTION_FIELDS:
        return "transaction"
    if field in TOP_LEVEL_FIELDS:
        return None
    return "source"


def _references(prefix: str, text: str) -> tuple[FieldReference, ...]:
    return tuple(FieldReference.parse(prefix, part.strip()) for part in text.split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class SmtOptions:
    """The flattening options; `from_properties` reads Debezium's names."""

    delete_mode: DeleteMode = DeleteMode.TOMBSTONE
    keep_tombstones: bool = False  # Debezium's own tombstones (null value after a delete) pass through
    add_fields: tuple[FieldReference, ...] = ()
    add_headers: tuple[FieldReference, ...] = ()
    unwrap_cells: bool = True  # cdc.output.format=legacy (the bridge's format); advanced: no unwrapping

    @property
    def rewrite(self) -> bool:
        return self.delete_mode in (DeleteMode.REWRITE, DeleteMode.REWRITE_WITH_TOMBSTONE)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], *, advanced_input: bool = False) -> SmtOptions:
        """`advanced_input`: the topics are in the worker's advanced format (plain values), so the
        SMT's own `cdc.output.format` defaults to `advanced` (no cell to unwrap: Debezium's result
        passes through, as the Java SMT configured so); `legacy` is refused for such topics."""
        for key in properties:
            if key not in KNOWN_OPTIONS:
                raise SparkJobError(f"{key}: unknown flattening option (known: {', '.join(sorted(KNOWN_OPTIONS))})")
        mode, keep = _delete_handling(properties)
        fields_prefix = properties.get("add.fields.prefix", "__")
        headers_prefix = properties.get("add.headers.prefix", "__")
        default_format = "advanced" if advanced_input else "legacy"
        output_format = properties.get("cdc.output.format", default_format).strip().lower()
        if output_format not in ("legacy", "advanced"):
            raise SparkJobError(f"cdc.output.format: must be legacy or advanced, got {output_format!r}")
        if advanced_input and output_format == "legacy":
            raise SparkJobError("cdc.output.format=legacy (flatten option): the topics are in the advanced format "
                                "(--cdc-output-format / --config), their values have no cell to unwrap; leave "
                                "the option out")
        return cls(
            delete_mode=mode,
            keep_tombstones=keep,
            add_fields=_references(fields_prefix, properties.get("add.fields", "")),
            add_headers=_references(headers_prefix, properties.get("add.headers", "")),
            unwrap_cells=output_format == "legacy",
        )


def _delete_handling(properties: Mapping[str, str]) -> tuple[DeleteMode, bool]:
    new = properties.get("delete.tombstone.handling.mode", "").strip().lower()
    if new:
        try:
            mode = DeleteMode(new)
        except ValueError:
            allowed = ", ".join(m.value for m in DeleteMode)
            raise SparkJobError(f"delete.tombstone.handling.mode: must be one of {allowed}, got {new!r}") from None
        return mode, mode is DeleteMode.REWRITE_WITH_TOMBSTONE
    legacy = properties.get("delete.handling.mode", "").strip().lower()
    drop_text = properties.get("drop.tombstones", "").strip().lower()
    if drop_text not in ("", "true", "false"):
        raise SparkJobError(f"drop.tombstones: must be true or false, got {drop_text!r}")
    if not legacy and not drop_text:
        return DeleteMode.TOMBSTONE, False
    drop_tombstones = drop_text != "false"
    legacy_modes = {"none": DeleteMode.TOMBSTONE, "tombstone": DeleteMode.TOMBSTONE, "drop": DeleteMode.DROP,
                    "rewrite": DeleteMode.REWRITE, "": DeleteMode.DROP}
    if legacy == "rewrite-with-tombstone":
        return DeleteMode.REWRITE_WITH_TOMBSTONE, True
    if legacy not in legacy_modes:
        raise SparkJobError("delete.handling.mode: must be one of none, drop, rewrite, tombstone, "
                            f"rewrite-with-tombstone, got {legacy!r}")
    return legacy_modes[legacy], not drop_tombstones
