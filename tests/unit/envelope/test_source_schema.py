"""The `source` block's schema as the Java connector writes it (Debezium 2.7.4.Final's
AbstractSourceInfoStructMaker): JSON schema bytes and the Avro form of `snapshot`."""

from __future__ import annotations

from bridge.envelope import connect_schema as cs
from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.source_info import SOURCE_SCHEMA

# The connector's `schema.source` as Kafka Connect's JsonConverter writes it: Debezium 2.7.4's
# commonSchemaBuilder (SNAPSHOT_RECORD_SCHEMA for `snapshot`) then ScyllaSourceInfoStructMaker's
# two fields (connector 74d336e). The differential tests in tests/peer compare it with the running
# connector's bytes.
CONNECTOR_SOURCE_SCHEMA = (
    b'{"type":"struct","fields":['
    b'{"type":"string","optional":false,"field":"version"},'
    b'{"type":"string","optional":false,"field":"connector"},'
    b'{"type":"string","optional":false,"field":"name"},'
    b'{"type":"int64","optional":false,"field":"ts_ms"},'
    b'{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,'
    b'"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},'
    b'{"type":"string","optional":false,"field":"db"},'
    b'{"type":"string","optional":true,"field":"sequence"},'
    b'{"type":"int64","optional":true,"field":"ts_us"},'
    b'{"type":"int64","optional":true,"field":"ts_ns"},'
    b'{"type":"string","optional":false,"field":"keyspace_name"},'
    b'{"type":"string","optional":false,"field":"table_name"}],'
    b'"optional":false,"name":"com.scylladb.cdc.debezium.connector"}'
)


def test_source_schema_json_bytes_are_the_connectors() -> None:
    assert JsonSerializer(True).schema_bytes(SOURCE_SCHEMA) == CONNECTOR_SOURCE_SCHEMA


def test_snapshot_enum_in_avro() -> None:
    envelope = cs.struct("P.ks.t.Envelope", [cs.ConnectField("source", SOURCE_SCHEMA)], optional=False)
    source = avro_schema(envelope)["fields"][0]["type"]
    snapshot = next(f for f in source["fields"] if f["name"] == "snapshot")
    assert snapshot == {
        "name": "snapshot",
        "type": [
            {
                "type": "string",
                "connect.version": 1,
                "connect.parameters": {"allowed": "true,last,false,incremental"},
                "connect.default": "false",
                "connect.name": "io.debezium.data.Enum",
            },
            "null",
        ],
        "default": "false",
    }
