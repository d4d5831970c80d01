"""Section 1 against real Cassandra: the log table's exact columns, types, key and order; ALTER
keeps it in step; CDC options and their errors; counters and nested logs refused (checklist 1)."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from bridge_devstack.sim import Emulator, InvalidRequestError, UnsupportedCqlError


def columns(emu: Emulator, table: str) -> dict[str, tuple[str, str, str, int]]:
    rows = emu.session.execute(
        "SELECT column_name, kind, type, clustering_order, position FROM system_schema.columns"
        " WHERE keyspace_name = %s AND table_name = %s",
        (emu.keyspace, table),
    )
    return {r.column_name: (r.kind, r.type, r.clustering_order, r.position) for r in rows}


def table_options(emu: Emulator, table: str) -> Any:
    return emu.session.execute(
        "SELECT comment, gc_grace_seconds, default_time_to_live, compaction, caching FROM system_schema.tables"
        " WHERE keyspace_name = %s AND table_name = %s",
        (emu.keyspace, table),
    ).one()


@pytest.fixture(scope="module", autouse=True)
def tables(emu: Emulator) -> None:
    emu.execute_script(
        """
        CREATE TYPE ut (a int, b text);
        CREATE TABLE full_types (pk int, pk2 text, ck timeuuid, s int static, m map<int, text>, st set<int>,
            l list<int>, u ut, fu frozen<ut>, fl frozen<list<int>>, tu tuple<int, text>, vec vector<float, 3>,
            PRIMARY KEY ((pk, pk2), ck)) WITH CLUSTERING ORDER BY (ck DESC) AND cdc = {'enabled': true, 'ttl': 3600};
        """
    )


def test_log_table_columns_types_and_key(emu: Emulator) -> None:
    """Every log column of section 1.2/1.3 with its exact type; cdc$ columns are the key; base
    keys and static columns are regular columns."""
    found = columns(emu, "full_types_scylla_cdc_log")
    assert found == {
        "cdc$stream_id": ("partition_key", "blob", "none", 0),
        "cdc$time": ("clustering", "timeuuid", "asc", 0),
        "cdc$batch_seq_no": ("clustering", "int", "asc", 1),
        "cdc$operation": ("regular", "tinyint", "none", -1),
        "cdc$ttl": ("regular", "bigint", "none", -1),
        "cdc$end_of_batch": ("regular", "boolean", "none", -1),
        "pk": ("regular", "int", "none", -1),
        "pk2": ("regular", "text", "none", -1),
        "ck": ("regular", "timeuuid", "none", -1),
        "s": ("regular", "int", "none", -1),
        "cdc$deleted_s": ("regular", "boolean", "none", -1),
        "m": ("regular", "frozen<map<int, text>>", "none", -1),
        "cdc$deleted_m": ("regular", "boolean", "none", -1),
        "cdc$deleted_elements_m": ("regular", "frozen<set<int>>", "none", -1),
        "st": ("regular", "frozen<set<int>>", "none", -1),
        "cdc$deleted_st": ("regular", "boolean", "none", -1),
        "cdc$deleted_elements_st": ("regular", "frozen<set<int>>", "none", -1),
        "l": ("regular", "frozen<map<timeuuid, int>>", "none", -1),
        "cdc$deleted_l": ("regular", "boolean", "none", -1),
        "cdc$deleted_elements_l": ("regular", "frozen<set<timeuuid>>", "none", -1),
        "u": ("regular", "frozen<ut>", "none", -1),
        "cdc$deleted_u": ("regular", "boolean", "none", -1),
        "cdc$deleted_elements_u": ("regular", "frozen<set<smallint>>", "none", -1),
        "fu": ("regular", "frozen<ut>", "none", -1),
        "cdc$deleted_fu": ("regular", "boolean", "none", -1),
        "fl": ("regular", "frozen<list<int>>", "none", -1),
        "cdc$deleted_fl": ("regular", "boolean", "none", -1),
        "tu": ("regular", "frozen<tuple<int, text>>", "none", -1),
        "cdc$deleted_tu": ("regular", "boolean", "none", -1),
        "vec": ("regular", "vector<float, 3>", "none", -1),
        "cdc$deleted_vec": ("regular", "boolean", "none", -1),
    }


def test_log_table_properties(emu: Emulator) -> None:
    """comment, TWCS with ScyllaDB's window for ttl 3600 (ws=150 s: 3 min, check 75 s), gc_grace 0,
    no table TTL, caching off."""
    options = table_options(emu, "full_types_scylla_cdc_log")
    assert options.comment == f"CDC log for {emu.keyspace}.full_types"
    assert options.gc_grace_seconds == 0 and options.default_time_to_live == 0
    assert options.compaction["class"].endswith("TimeWindowCompactionStrategy")
    assert options.compaction["compaction_window_unit"] == "MINUTES"
    assert options.compaction["compaction_window_size"] == "3"
    assert options.compaction["expired_sstable_check_frequency_seconds"] == "75"
    assert options.caching == {"keys": "NONE", "rows_per_partition": "NONE"}
    stored = emu.session.execute(
        f"SELECT cdc FROM {emu.settings.tablets_keyspace}.scylla_tables WHERE keyspace_name = %s AND table_name = %s",
        (emu.keyspace, "full_types"),
    ).one()
    assert stored.cdc == {"delta": "full", "enabled": "true", "postimage": "false", "preimage": "false", "ttl": "3600"}


def test_alter_add_and_drop_keep_the_log_in_step(emu: Emulator) -> None:
    """ALTER TABLE ADD adds the log columns (with companions), DROP drops them; later writes log the new column."""
    emu.execute("CREATE TABLE alt (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    emu.execute("ALTER TABLE alt ADD (m map<int, int>, w text)")
    found = columns(emu, "alt_scylla_cdc_log")
    assert found["m"][1] == "frozen<map<int, int>>" and found["cdc$deleted_elements_m"][1] == "frozen<set<int>>"
    assert found["w"][1] == "text" and "cdc$deleted_w" in found
    (record,) = emu.execute("UPDATE alt SET w = 'x', m = m + {1: 2} WHERE pk = 1")
    assert record.rows[0].values["w"] == "x" and record.rows[0].values["m"] == {1: 2}
    emu.execute("ALTER TABLE alt DROP v")
    found = columns(emu, "alt_scylla_cdc_log")
    assert "v" not in found and "cdc$deleted_v" not in found and "w" in found
    emu.execute("ALTER TABLE alt ADD l list<int>")
    (record,) = emu.execute("UPDATE alt SET l = l + [5] WHERE pk = 1")
    assert list(record.rows[0].values["l"].values()) == [5]


def test_disable_keeps_the_log_and_reenable_resyncs(emu: Emulator) -> None:
    """cdc enabled=false keeps the log table detached (no rows); re-enabling re-attaches it with
    the columns added meanwhile."""
    emu.execute("CREATE TABLE dis (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    emu.execute("ALTER TABLE dis WITH cdc = {'enabled': false}")
    assert emu.execute("UPDATE dis SET v = 1 WHERE pk = 1") == []
    assert "cdc$operation" in columns(emu, "dis_scylla_cdc_log")
    emu.execute("ALTER TABLE dis ADD w int")
    emu.execute("ALTER TABLE dis WITH cdc = {'enabled': true, 'preimage': true}")
    assert "w" in columns(emu, "dis_scylla_cdc_log")
    (record,) = emu.execute("UPDATE dis SET w = 2 WHERE pk = 1")
    assert [int(r.operation) for r in record.rows] == [0, 1]


def cdc_extension(emu: Emulator, table: str) -> dict[str, str] | None:
    """system_schema.tables.extensions['cdc'] read as the Scylla Java driver reads it (a
    little-endian count, then length-prefixed UTF-8 keys and values)."""
    row = emu.session.execute(
        "SELECT extensions FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (emu.keyspace, table),
    ).one()
    raw = (row.extensions or {}).get("cdc")
    if raw is None:
        return None
    (count,), at, texts = struct.unpack_from("<I", raw), 4, []
    for _ in range(2 * count):
        (size,) = struct.unpack_from("<I", raw, at)
        texts.append(raw[at + 4 : at + 4 + size].decode())
        at += 4 + size
    assert at == len(raw)
    return dict(zip(texts[::2], texts[1::2], strict=True))


def test_cdc_schema_extension_follows_the_options(emu: Emulator) -> None:
    """ScyllaDB's `cdc` extension (what the Java connector checks) is written on enable and kept in
    step through ALTERs (Cassandra rewrites the schema row on each); a table never CDC-enabled has none."""
    emu.execute("CREATE TABLE ext (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 600}")
    options = {"delta": "full", "enabled": "true", "postimage": "false", "preimage": "false", "ttl": "600"}
    assert cdc_extension(emu, "ext") == options
    emu.execute("ALTER TABLE ext ADD w int")
    assert cdc_extension(emu, "ext") == options
    emu.execute("ALTER TABLE ext WITH comment = 'c' AND cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}")
    assert cdc_extension(emu, "ext") == {**options, "preimage": "full", "postimage": "true", "ttl": "86400"}
    emu.execute("ALTER TABLE ext WITH cdc = {'enabled': false}")
    assert cdc_extension(emu, "ext") == {**options, "enabled": "false", "ttl": "86400"}
    emu.execute("CREATE TABLE plain (pk int PRIMARY KEY, v int)")
    assert cdc_extension(emu, "plain") is None


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        (
            "CREATE TABLE cnt (pk int PRIMARY KEY, c counter) WITH cdc = {'enabled': true}",
            r"Cannot create CDC log for table sim_test_sim_schema_\w+\.cnt\. Counter support not implemented",
        ),
        (
            "CREATE TABLE x_scylla_cdc_log (pk int PRIMARY KEY) WITH cdc = {'enabled': true}",
            "creating nested CDC logs is not allowed",
        ),
        (
            "CREATE TABLE bad (pk int PRIMARY KEY) WITH cdc = {'enabled': true, 'colour': 'red'}",
            "Invalid CDC option: colour",
        ),
        (
            "CREATE TABLE bad (pk int PRIMARY KEY) WITH cdc = {'preimage': 'maybe'}",
            'Invalid value for CDC option "preimage"',
        ),
        ("CREATE TABLE bad (pk int PRIMARY KEY) WITH cdc = {'ttl': -1}", "ttl must be >= 0"),
    ],
)
def test_refused_tables(emu: Emulator, cql: str, message: str) -> None:
    """Counters, nested logs and bad options fail with ScyllaDB's messages, creating nothing."""
    with pytest.raises(InvalidRequestError, match=message):
        emu.execute(cql)
    name = cql.split()[2]
    assert not columns(emu, name) and not columns(emu, f"{name}_scylla_cdc_log")


def test_counter_table_without_cdc_is_allowed(emu: Emulator) -> None:
    """Counters only clash with CDC: a counter table without CDC is created normally."""
    emu.execute("CREATE TABLE plain_cnt (pk int PRIMARY KEY, c counter)")
    assert "c" in columns(emu, "plain_cnt")
    with pytest.raises(UnsupportedCqlError, match="counter column c: counter updates"):
        emu.execute("UPDATE plain_cnt SET c = c + 1 WHERE pk = 1")


def test_cassandra_refusals_are_emulator_errors(emu: Emulator) -> None:
    """What Cassandra itself refuses (an existing table, a bad type option) comes out as
    InvalidRequestError with Cassandra's message; USE of a missing keyspace is refused first."""
    emu.execute("CREATE TABLE twice (pk int PRIMARY KEY)")
    with pytest.raises(InvalidRequestError, match=r"Cassandra refused the statement: .*already exists"):
        emu.execute("CREATE TABLE twice (pk int PRIMARY KEY)")
    with pytest.raises(InvalidRequestError, match="Keyspace 'no_such_ks' does not exist"):
        emu.execute("USE no_such_ks")
    with pytest.raises(InvalidRequestError, match="unknown type 'nosuch'"):
        emu.execute("CREATE TABLE badtype (pk int PRIMARY KEY, v nosuch)")


def test_a_table_holding_the_log_name_refuses_the_cdc_table(emu: Emulator) -> None:
    """ScyllaDB: `Cannot create CDC log table for table ks.X because a table of name
    ks.X_scylla_cdc_log already exists`, and neither table is created or changed."""
    emu.execute("CREATE TABLE taken_scylla_cdc_log (pk int PRIMARY KEY, note text)")
    before = columns(emu, "taken_scylla_cdc_log")
    with pytest.raises(InvalidRequestError, match=(
        rf"^Cannot create CDC log table for table {emu.keyspace}\.taken because a table of name"
        rf" {emu.keyspace}\.taken_scylla_cdc_log already exists$"
    )):
        emu.execute("CREATE TABLE taken (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    assert not columns(emu, "taken") and columns(emu, "taken_scylla_cdc_log") == before
    emu.execute("CREATE TABLE taken (pk int PRIMARY KEY, v int)")  # without CDC the name is free


@pytest.mark.parametrize("change", ["ADD c int", "DROP v", 'DROP "cdc$deleted_v"', "ADD (a int, b text)"])
def test_the_columns_of_a_cdc_log_table_cannot_be_altered(emu: Emulator, change: str) -> None:
    """ScyllaDB refuses column changes on a CDC log table; base and log stay in step."""
    emu.execute("CREATE TABLE IF NOT EXISTS guarded (pk int PRIMARY KEY, v int, u int) WITH cdc = {'enabled': true}")
    before = columns(emu, "guarded_scylla_cdc_log")
    with pytest.raises(InvalidRequestError, match=(
        r"^You cannot modify the set of columns of a CDC log table directly\. Modify the base table instead\.$"
    )):
        emu.execute(f"ALTER TABLE guarded_scylla_cdc_log {change}")
    assert columns(emu, "guarded_scylla_cdc_log") == before


def test_a_dropped_column_cannot_come_back_at_once(emu: Emulator) -> None:
    """ScyllaDB drops the log's columns with a timestamp about 5 s ahead and refuses to re-add
    the name until then (`... was dropped too recently. Please retry after 5 seconds`),
    leaving the base table as it was; after that the column comes back in both tables."""
    emu.execute("CREATE TABLE readd (pk int PRIMARY KEY, v int, gone int) WITH cdc = {'enabled': true}")
    emu.execute("ALTER TABLE readd DROP gone")
    with pytest.raises(InvalidRequestError, match=(
        r"^Cannot add column gone because a column with the same name was dropped too recently\."
        r" Please retry after [45] seconds$"
    )):
        emu.execute("ALTER TABLE readd ADD gone int")
    assert "gone" not in columns(emu, "readd") and "gone" not in columns(emu, "readd_scylla_cdc_log")
    emu.execute("ALTER TABLE readd ADD other int")  # other names are not held back
    time.sleep(5.5)
    emu.execute("ALTER TABLE readd ADD gone int")
    assert "gone" in columns(emu, "readd") and "cdc$deleted_gone" in columns(emu, "readd_scylla_cdc_log")
    (record,) = emu.execute("UPDATE readd SET gone = 7 WHERE pk = 1")
    assert record.rows[0].values["gone"] == 7


def test_counter_and_plain_columns_do_not_mix(emu: Emulator) -> None:
    """A refused ALTER TABLE ... ADD is one InvalidRequestError with ScyllaDB's text (it ended
    in a driver traceback before), and changes nothing."""
    emu.execute("CREATE TABLE mix (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    with pytest.raises(InvalidRequestError, match=r"^Cannot add a counter column \(c\) in a non counter column family"):
        emu.execute("ALTER TABLE mix ADD (c counter)")
    emu.execute("CREATE TABLE mixc (pk int PRIMARY KEY, c counter)")
    with pytest.raises(InvalidRequestError, match=r"^Cannot add a non counter column \(v\) in a counter column family"):
        emu.execute("ALTER TABLE mixc ADD v int")
    assert "c" not in columns(emu, "mix") and "v" not in columns(emu, "mixc")
