"""Failures that repeat on every retry are not transient: the driver's decode failures, and a CQL
type the bridge cannot read (a schema error, so start-up names the table in one line and a
group after an `ALTER TABLE ... ADD` fails visibly instead of crashing the worker). On ffd4452
the first was retried for ever and the second was a bare ValueError."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cassandra import DriverException

from bridge.scylla.errors import ErrorKind, SchemaError, classify
from bridge.scylla.table_schema import column_of


def test_a_decode_failure_of_the_driver_is_fatal_and_other_driver_errors_stay_transient() -> None:
    decode = DriverException('Failed decoding result column "v" of type varint: unpack requires a buffer')
    assert classify(decode) is ErrorKind.FATAL
    assert classify(DriverException("connection pool shut down")) is ErrorKind.TRANSIENT


def test_an_unreadable_cql_type_is_a_schema_error_naming_table_and_column() -> None:
    row = SimpleNamespace(column_name="v", type="vector<float, 3", kind="regular", clustering_order="none")
    with pytest.raises(SchemaError, match=r"^ks\.t: column v: "):
        column_of(row, {}, "ks.t")
