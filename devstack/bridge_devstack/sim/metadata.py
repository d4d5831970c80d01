"""Reads and writes the stream metadata tables, with ScyllaDB's schemas (cdc-log-format.md 6.3),
in the two keyspaces the settings name (Cassandra refuses new tables in its `system*` keyspaces).

Vnode keyspace: `cdc_generation_timestamps`, `cdc_streams_descriptions_v2`.
Tablets keyspace: `cdc_timestamps`, `cdc_streams` (materialized here; virtual in ScyllaDB), plus
`scylla_keyspaces` and `scylla_tables`, the emulator's copies of ScyllaDB's `system_schema` tables
of the same names: a keyspace with a non-null `initial_tablets` uses tablets, and `scylla_tables.cdc`
holds a table's CDC options as DESCRIBE shows them.

Publishing follows ScyllaDB: stream rows first, then the timestamp that makes them visible.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim.streams import Generation, StreamSet, VnodeRange, shard_ordered

_REPLICATION = "{'class': 'SimpleStrategy', 'replication_factor': 1}"

STATE_CURRENT, STATE_CLOSED, STATE_OPENED = 0, 1, 2


def _vnode_tables(ks: str) -> dict[str, str]:
    return {
        "cdc_generation_timestamps": f"CREATE TABLE IF NOT EXISTS {ks}.cdc_generation_timestamps ("
        " key text, time timestamp, expired timestamp, PRIMARY KEY (key, time))"
        " WITH CLUSTERING ORDER BY (time DESC)",
        "cdc_streams_descriptions_v2": f"CREATE TABLE IF NOT EXISTS {ks}.cdc_streams_descriptions_v2 ("
        " time timestamp, range_end bigint, streams frozen<set<blob>>, PRIMARY KEY (time, range_end))",
    }


def _tablet_tables(ks: str) -> dict[str, str]:
    return {
        "cdc_timestamps": f"CREATE TABLE IF NOT EXISTS {ks}.cdc_timestamps ("
        " keyspace_name text, table_name text, timestamp timestamp,"
        " PRIMARY KEY ((keyspace_name, table_name), timestamp)) WITH CLUSTERING ORDER BY (timestamp DESC)",
        "cdc_streams": f"CREATE TABLE IF NOT EXISTS {ks}.cdc_streams ("
        " keyspace_name text, table_name text, timestamp timestamp, stream_state tinyint, stream_id blob,"
        " PRIMARY KEY ((keyspace_name, table_name), timestamp, stream_state, stream_id))",
        "scylla_keyspaces": f"CREATE TABLE IF NOT EXISTS {ks}.scylla_keyspaces ("
        " keyspace_name text PRIMARY KEY, initial_tablets int, storage_type text, storage_options map<text, text>)",
        "scylla_tables": f"CREATE TABLE IF NOT EXISTS {ks}.scylla_tables ("
        " keyspace_name text, table_name text, cdc map<text, text>, partitioner text,"
        " PRIMARY KEY (keyspace_name, table_name))",
    }


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def datetime_to_ms(value: datetime) -> int:
    moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


class MetadataStore:
    """All metadata I/O of the emulator, over one cassandra-driver session."""

    def __init__(self, session: Any, vnodes_keyspace: str, tablets_keyspace: str, ignore_msb: int) -> None:
        self.session = session
        self.vnodes_keyspace = vnodes_keyspace
        self.tablets_keyspace = tablets_keyspace
        self.ignore_msb = ignore_msb

    # ------------------------------------------------------------ schema

    def ensure_schema(self) -> None:
        """Create the two keyspaces and their tables unless they exist (checked first, because
        schema changes are slow)."""
        for keyspace, tables in (
            (self.vnodes_keyspace, _vnode_tables(self.vnodes_keyspace)),
            (self.tablets_keyspace, _tablet_tables(self.tablets_keyspace)),
        ):
            rows = self.session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
            )
            existing = {row.table_name for row in rows}
            if not existing:
                self.session.execute(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {_REPLICATION}")
            for name, statement in tables.items():
                if name not in existing:
                    self.session.execute(statement)

    # ------------------------------------------------------------ vnode generations

    def generation_timestamps(self) -> list[int]:
        """Start of every generation, in ms, oldest first."""
        rows = self.session.execute(
            f"SELECT time FROM {self.vnodes_keyspace}.cdc_generation_timestamps WHERE key = 'timestamps'"
        )
        return sorted(datetime_to_ms(row.time) for row in rows)

    def load_generation(self, timestamp_ms: int) -> Generation:
        rows = self.session.execute(
            f"SELECT range_end, streams FROM {self.vnodes_keyspace}.cdc_streams_descriptions_v2 WHERE time = %s",
            (ms_to_datetime(timestamp_ms),),
        )
        ranges = [
            VnodeRange(row.range_end, shard_ordered((StreamId(bytes(s)) for s in row.streams), self.ignore_msb))
            for row in rows
        ]
        return Generation(timestamp_ms, tuple(sorted(ranges, key=lambda r: r.end)), self.ignore_msb)

    def publish_generation(self, generation: Generation) -> None:
        moment = ms_to_datetime(generation.timestamp_ms)
        insert = self.session.prepare(
            f"INSERT INTO {self.vnodes_keyspace}.cdc_streams_descriptions_v2 (time, range_end, streams)"
            " VALUES (?, ?, ?)"
        )
        for rng in generation.ranges:
            self.session.execute(insert, (moment, rng.end, {s.raw for s in rng.streams}))
        self.session.execute(
            f"INSERT INTO {self.vnodes_keyspace}.cdc_generation_timestamps (key, time) VALUES ('timestamps', %s)",
            (moment,),
        )

    # ------------------------------------------------------------ tablet stream sets

    def stream_set_timestamps(self, keyspace: str, table: str) -> list[int]:
        rows = self.session.execute(
            f"SELECT timestamp FROM {self.tablets_keyspace}.cdc_timestamps"
            " WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )
        return sorted(datetime_to_ms(row.timestamp) for row in rows)

    def load_stream_set(self, keyspace: str, table: str, timestamp_ms: int) -> StreamSet:
        rows = self.session.execute(
            f"SELECT stream_id FROM {self.tablets_keyspace}.cdc_streams WHERE keyspace_name = %s"
            " AND table_name = %s AND timestamp = %s AND stream_state = %s",
            (keyspace, table, ms_to_datetime(timestamp_ms), STATE_CURRENT),
        )
        streams = sorted((StreamId(bytes(row.stream_id)) for row in rows), key=lambda s: s.token)
        return StreamSet(timestamp_ms, tuple(streams))

    def publish_stream_set(self, keyspace: str, table: str, new: StreamSet, previous: StreamSet | None) -> None:
        """Rows for the current set (state 0), the streams it opens (2) and closes (1), then the
        timestamp row."""
        moment = ms_to_datetime(new.timestamp_ms)
        old = set(previous.streams) if previous else set()
        insert = self.session.prepare(
            f"INSERT INTO {self.tablets_keyspace}.cdc_streams"
            " (keyspace_name, table_name, timestamp, stream_state, stream_id) VALUES (?, ?, ?, ?, ?)"
        )
        rows = [(STATE_CURRENT, s) for s in new.streams]
        rows += [(STATE_OPENED, s) for s in new.streams if s not in old]
        rows += [(STATE_CLOSED, s) for s in sorted(old - set(new.streams), key=lambda s: s.token)]
        for state, stream in rows:
            self.session.execute(insert, (keyspace, table, moment, state, stream.raw))
        self.session.execute(
            f"INSERT INTO {self.tablets_keyspace}.cdc_timestamps (keyspace_name, table_name, timestamp)"
            " VALUES (%s, %s, %s)",
            (keyspace, table, moment),
        )

    def forget_table(self, keyspace: str, table: str) -> None:
        for name in ("cdc_timestamps", "cdc_streams"):
            self.session.execute(
                f"DELETE FROM {self.tablets_keyspace}.{name} WHERE keyspace_name = %s AND table_name = %s",
                (keyspace, table),
            )
        self.session.execute(
            f"DELETE FROM {self.tablets_keyspace}.scylla_tables WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )

    # ------------------------------------------------------------ keyspace modes and table options

    def set_keyspace_tablets(self, keyspace: str, initial_tablets: int | None) -> None:
        self.session.execute(
            f"INSERT INTO {self.tablets_keyspace}.scylla_keyspaces (keyspace_name, initial_tablets) VALUES (%s, %s)",
            (keyspace, initial_tablets),
        )

    def keyspace_tablets(self, keyspace: str) -> int | None:
        """The keyspace's initial tablet count when it uses tablets, else None."""
        row = self.session.execute(
            f"SELECT initial_tablets FROM {self.tablets_keyspace}.scylla_keyspaces WHERE keyspace_name = %s",
            (keyspace,),
        ).one()
        return None if row is None else row.initial_tablets

    def forget_keyspace(self, keyspace: str) -> None:
        tables = self.session.execute(
            f"SELECT table_name FROM {self.tablets_keyspace}.scylla_tables WHERE keyspace_name = %s", (keyspace,)
        )
        for row in list(tables):
            self.forget_table(keyspace, row.table_name)
        self.session.execute(
            f"DELETE FROM {self.tablets_keyspace}.scylla_keyspaces WHERE keyspace_name = %s", (keyspace,)
        )

    def set_table_cdc(self, keyspace: str, table: str, options: dict[str, str] | None, partitioner: str | None) -> None:
        self.session.execute(
            f"INSERT INTO {self.tablets_keyspace}.scylla_tables (keyspace_name, table_name, cdc, partitioner)"
            " VALUES (%s, %s, %s, %s)",
            (keyspace, table, options, partitioner),
        )

    def cdc_extension(self, keyspace: str, table: str) -> bytes | None:
        row = self.session.execute(
            "SELECT extensions FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        ).one()
        return None if row is None or not row.extensions else row.extensions.get("cdc")

    def set_cdc_extension(self, keyspace: str, table: str, extension: bytes) -> None:
        """ScyllaDB's `cdc` extension in Cassandra's own `system_schema.tables` row of the table,
        beside the extensions already there, for clients that read CDC options from the schema
        (the Java connector's config check). Cassandra accepts `WITH extensions` but ignores it;
        the row written directly is kept, until a schema change of the table rewrites it (so the
        emulator writes it again after each one)."""
        row = self.session.execute(
            "SELECT extensions FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        ).one()
        extensions = dict(row.extensions or {}) if row is not None else {}
        extensions["cdc"] = extension
        self.session.execute(
            "UPDATE system_schema.tables SET extensions = %s WHERE keyspace_name = %s AND table_name = %s",
            (extensions, keyspace, table),
        )

    def table_cdc(self, keyspace: str, table: str) -> dict[str, str] | None:
        row = self.session.execute(
            f"SELECT cdc FROM {self.tablets_keyspace}.scylla_tables WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        ).one()
        return dict(row.cdc) if row is not None and row.cdc else None
