"""Test helper: CDC metadata and log rows written straight into Cassandra with ScyllaDB's
schemas, for tests of the source that need exact control of streams, generations and rows
(the emulator covers the end-to-end cases)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bridge.scylla import log_schema
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import Operation
from bridge.scylla.stream_id import StreamId

VNODE_TABLES = (
    "CREATE TABLE {ks}.cdc_generation_timestamps (key text, time timestamp, expired timestamp, "
    "PRIMARY KEY (key, time)) WITH CLUSTERING ORDER BY (time DESC)",
    "CREATE TABLE {ks}.cdc_streams_descriptions_v2 (time timestamp, range_end bigint, "
    "streams frozen<set<blob>>, PRIMARY KEY (time, range_end))",
)
TABLET_TABLES = (
    "CREATE TABLE {ks}.cdc_timestamps (keyspace_name text, table_name text, timestamp timestamp, "
    "PRIMARY KEY ((keyspace_name, table_name), timestamp)) WITH CLUSTERING ORDER BY (timestamp DESC)",
    "CREATE TABLE {ks}.cdc_streams (keyspace_name text, table_name text, timestamp timestamp, "
    "stream_state tinyint, stream_id blob, PRIMARY KEY ((keyspace_name, table_name), timestamp, stream_state, "
    "stream_id))",
)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LogKit:
    session: Any
    keyspace: str

    def create_metadata(self) -> None:
        for cql in VNODE_TABLES + TABLET_TABLES:
            self.session.execute(cql.format(ks=self.keyspace))

    def create_table(self, table: str, extra_columns: str = "v int") -> None:
        """Base table `(pk int, ck int, <extra>)` and its log table (value columns are atomic ints
        or texts here, so the log columns are the base type plus `cdc$deleted_X`)."""
        ks = self.keyspace
        self.session.execute(f"CREATE TABLE {ks}.{table} (pk int, ck int, {extra_columns}, PRIMARY KEY (pk, ck))")
        value_columns = []
        for part in extra_columns.split(","):
            name, cql_type = part.split()
            value_columns.append(f'{name} {cql_type}, "cdc$deleted_{name}" boolean')
        self.session.execute(
            f"CREATE TABLE {ks}.{table}_scylla_cdc_log ("
            '"cdc$stream_id" blob, "cdc$time" timeuuid, "cdc$batch_seq_no" int, "cdc$operation" tinyint, '
            '"cdc$ttl" bigint, "cdc$end_of_batch" boolean, pk int, ck int, '
            + ", ".join(value_columns)
            + ', PRIMARY KEY ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no"))'
        )

    def publish_generation(self, start_ms: int, ranges: Sequence[tuple[int, Sequence[StreamId]]]) -> None:
        ks = self.keyspace
        for range_end, streams in ranges:
            self.session.execute(
                f"INSERT INTO {ks}.cdc_streams_descriptions_v2 (time, range_end, streams) VALUES (%s, %s, %s)",
                (start_ms, range_end, {s.raw for s in streams}),
            )
        self.session.execute(
            f"INSERT INTO {ks}.cdc_generation_timestamps (key, time) VALUES ('timestamps', %s)", (start_ms,)
        )

    def publish_stream_set(
        self, table: str, at_ms: int, current: Sequence[StreamId], closed: Sequence[StreamId] = (),
        opened: Sequence[StreamId] = (),
    ) -> None:
        ks = self.keyspace
        insert = (
            f"INSERT INTO {ks}.cdc_streams (keyspace_name, table_name, timestamp, stream_state, stream_id) "
            "VALUES (%s, %s, %s, %s, %s)"
        )
        for state, streams in ((0, current), (1, closed), (2, opened)):
            for stream in streams:
                self.session.execute(insert, (ks, table, at_ms, state, stream.raw))
        self.session.execute(
            f"INSERT INTO {ks}.cdc_timestamps (keyspace_name, table_name, timestamp) VALUES (%s, %s, %s)",
            (ks, table, at_ms),
        )

    def write_record(
        self, table: str, stream: StreamId, micros: int, rows: Sequence[tuple[Operation, dict[str, Any]]]
    ) -> uuid.UUID:
        """One record: rows share one `cdc$time`, seq 0.., end_of_batch on the last."""
        time_uuid = timeuuid_for(micros)
        for seq, (operation, values) in enumerate(rows):
            columns = {
                log_schema.STREAM_ID: stream.raw, log_schema.TIME: time_uuid, log_schema.BATCH_SEQ_NO: seq,
                log_schema.OPERATION: int(operation),
                log_schema.END_OF_BATCH: True if seq == len(rows) - 1 else None,
                **values,
            }
            names = ", ".join(f'"{n}"' for n in columns)
            marks = ", ".join(["%s"] * len(columns))
            self.session.execute(
                f"INSERT INTO {self.keyspace}.{table}_scylla_cdc_log ({names}) VALUES ({marks})",
                tuple(columns.values()),
            )
        return time_uuid
