"""ExtractNewRecordState option parsing: Debezium's names, defaults and legacy pair."""

from __future__ import annotations

import pytest

from bridge.spark.core.errors import SparkJobError
from bridge.spark.core.smt_options import DeleteMode, FieldReference, SmtOptions


def test_default_is_debeziums_current_tombstone_mode() -> None:
    options = SmtOptions.from_properties({})
    assert options.delete_mode is DeleteMode.TOMBSTONE and not options.keep_tombstones and options.unwrap_cells


@pytest.mark.parametrize(("props", "mode", "keep"), [
    ({"delete.tombstone.handling.mode": "drop"}, DeleteMode.DROP, False),
    ({"delete.tombstone.handling.mode": "rewrite"}, DeleteMode.REWRITE, False),
    ({"delete.tombstone.handling.mode": "rewrite-with-tombstone"}, DeleteMode.REWRITE_WITH_TOMBSTONE, True),
    ({"delete.tombstone.handling.mode": "delete-to-tombstone"}, DeleteMode.DELETE_TO_TOMBSTONE, False),
    ({"delete.handling.mode": "none"}, DeleteMode.TOMBSTONE, False),
    ({"delete.handling.mode": "rewrite", "drop.tombstones": "false"}, DeleteMode.REWRITE, True),
    ({"drop.tombstones": "true"}, DeleteMode.DROP, False),  # Debezium 2.x: delete.handling.mode=drop
    ({"delete.handling.mode": "rewrite-with-tombstone"}, DeleteMode.REWRITE_WITH_TOMBSTONE, True),
    ({"delete.tombstone.handling.mode": "tombstone", "delete.handling.mode": "rewrite"}, DeleteMode.TOMBSTONE, False),
])
def test_delete_handling(props: dict[str, str], mode: DeleteMode, keep: bool) -> None:
    options = SmtOptions.from_properties(props)
    assert (options.delete_mode, options.keep_tombstones) == (mode, keep)


def test_field_references_follow_debezium_naming() -> None:
    options = SmtOptions.from_properties({"add.fields": "op, table_name,source.ts_ms,ts_ms:when,id",
                                          "add.headers": "op", "add.headers.prefix": "x_"})
    assert options.add_fields == (
        FieldReference(None, "op", "__op"),
        FieldReference("source", "table_name", "__table_name"),
        FieldReference("source", "ts_ms", "__source_ts_ms"),
        FieldReference(None, "ts_ms", "__when"),
        FieldReference("transaction", "id", "__id"),
    )
    assert options.add_headers == (FieldReference(None, "op", "x_op"),)


@pytest.mark.parametrize("props", [
    {"delete.tombstone.handling.mode": "nope"}, {"delete.handling.mode": "x"}, {"drop.tombstones": "maybe"},
    {"route.by.field": "x"}, {"add.fields": "a:b:c"}, {"cdc.output.format": "fancy"},
])
def test_bad_options_name_the_key(props: dict[str, str]) -> None:
    with pytest.raises(SparkJobError, match=next(iter(props)).split(".")[0]):
        SmtOptions.from_properties(props)
