"""The `source` block of every envelope (connector.md section 2.4) and the envelope's constant parts.

Schema `com.scylladb.cdc.debezium.connector`, fields in Debezium 2.7's common order followed by
the connector's own: `version`, `connector` (`scylla`), `name` (`topic.prefix`), `ts_ms`,
`snapshot` (a Debezium enum: `"false"` for changes, `"true"` or `"incremental"` in snapshot
records), `db` (keyspace), `sequence` (null), `ts_us`, `ts_ns`, `keyspace_name`, `table_name`.
Times are the write time carried by `cdc$time`; `ts_ns` is `ts_us × 1000` (the Java connector
derives it from the millisecond instant).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bridge import __version__
from bridge.envelope import connect_schema as cs

SOURCE_SCHEMA_NAME = "com.scylladb.cdc.debezium.connector"
CONNECTOR = "scylla"
# Debezium 2.7.4.Final's AbstractSourceInfoStructMaker.SNAPSHOT_RECORD_SCHEMA, which every record of the
# Java connector carries: the enum's `allowed` lists four of SnapshotRecord's seven names (the
# values the bridge writes, `false`, `true` and `incremental`, are among them). A longer list is
# a schema change to a consumer moving over (every JSON message, a new Avro schema version).
SNAPSHOT_VALUES = "true,last,false,incremental"

SOURCE_SCHEMA = cs.struct(
    SOURCE_SCHEMA_NAME,
    [
        cs.ConnectField("version", cs.REQUIRED_STRING),
        cs.ConnectField("connector", cs.REQUIRED_STRING),
        cs.ConnectField("name", cs.REQUIRED_STRING),
        cs.ConnectField("ts_ms", cs.REQUIRED_INT64),
        cs.ConnectField("snapshot", cs.debezium_enum(SNAPSHOT_VALUES, "false")),
        cs.ConnectField("db", cs.REQUIRED_STRING),
        cs.ConnectField("sequence", cs.OPTIONAL_STRING),
        cs.ConnectField("ts_us", cs.OPTIONAL_INT64),
        cs.ConnectField("ts_ns", cs.OPTIONAL_INT64),
        cs.ConnectField("keyspace_name", cs.REQUIRED_STRING),
        cs.ConnectField("table_name", cs.REQUIRED_STRING),
    ],
    optional=False,
)

# Debezium's transaction block (TransactionMonitor.TRANSACTION_BLOCK_SCHEMA); always null here.
TRANSACTION_SCHEMA = cs.ConnectSchema(
    cs.STRUCT,
    optional=True,
    name="event.block",
    version=1,
    fields=(
        cs.ConnectField("id", cs.REQUIRED_STRING),
        cs.ConnectField("total_order", cs.REQUIRED_INT64),
        cs.ConnectField("data_collection_order", cs.REQUIRED_INT64),
    ),
)


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """The per-table constant part of the `source` block."""

    name: str
    keyspace: str
    table: str
    version: str = __version__
    # The block with its times zeroed: copying it and setting the times is cheaper than building
    # an 11-entry dict per record (and keeps the field order).
    template: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        template = {
            "version": self.version,
            "connector": CONNECTOR,
            "name": self.name,
            "ts_ms": 0,
            "snapshot": "false",
            "db": self.keyspace,
            "sequence": None,
            "ts_us": 0,
            "ts_ns": 0,
            "keyspace_name": self.keyspace,
            "table_name": self.table,
        }
        object.__setattr__(self, "template", template)

    def block(self, write_micros: int) -> dict[str, Any]:
        block = self.template.copy()
        block["ts_ms"] = write_micros // 1000
        block["ts_us"] = write_micros
        block["ts_ns"] = write_micros * 1000
        return block
