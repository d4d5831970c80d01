"""The `sim` commands and the load generator against real Cassandra."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge import cli
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.load import LoadGenerator, LoadSpec, bulk_fill, parse_mix
from bridge_devstack.stack.layout import Endpoints


@pytest.fixture(autouse=True)
def cli_on_the_test_stack(stack: Endpoints, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `sim` commands connect where the test stack's Cassandra is (its ports may be shifted)."""
    monkeypatch.setenv("CDC_BRIDGE_SIM_CONTACT_POINTS", stack.cassandra_host)
    monkeypatch.setenv("CDC_BRIDGE_SIM_PORT", str(stack.cassandra_port))


def count(emu: Emulator, table: str) -> int:
    return int(emu.session.execute(f"SELECT count(*) FROM {emu.keyspace}.{table}").one()[0])


def test_exec_file_runs_schema_and_writes_in_order(
    tmp_path: Path, emu: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script with CREATE TYPE/TABLE, ALTER TABLE and writes runs in one process; --json prints
    one line per record."""
    script = tmp_path / "script.cql"
    script.write_text(
        f"""
        CREATE TYPE {emu.keyspace}.pt (a int, b text);
        CREATE TABLE {emu.keyspace}.cli_t (pk int, ck int, v int, u pt, PRIMARY KEY (pk, ck))
            WITH cdc = {{'enabled': true, 'postimage': true}};
        ALTER TABLE {emu.keyspace}.cli_t ADD w text;
        INSERT INTO {emu.keyspace}.cli_t (pk, ck, v, w) VALUES (1, 2, 3, 'x');
        BEGIN BATCH UPDATE {emu.keyspace}.cli_t SET u.a = 5 WHERE pk = 1 AND ck = 2;
            DELETE FROM {emu.keyspace}.cli_t WHERE pk = 2; APPLY BATCH;
        """
    )
    assert cli.main(["sim", "exec", "--json", "-f", str(script)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [[row["op"] for row in line["rows"]] for line in lines] == [[2, 9], [1, 9], [4]]
    assert lines[1]["rows"][1]["values"] == {"pk": 1, "ck": 2, "v": 3, "w": "x", "u": [5, None]}
    assert count(emu, "cli_t_scylla_cdc_log") == 5


def test_exec_errors_name_the_statement(tmp_path: Path, emu: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    """A failing statement of a script stops it with exit code 2 and says which one failed."""
    script = tmp_path / "bad.cql"
    script.write_text(
        f"CREATE TABLE {emu.keyspace}.cli_e (pk int PRIMARY KEY, v int); UPDATE {emu.keyspace}.cli_e"
        " SET nope = 1 WHERE pk = 1;"
    )
    assert cli.main(["sim", "exec", "-f", str(script)]) == 2
    assert capsys.readouterr().err.strip() == "error: statement 2: Undefined column name nope"


def test_bootstrap_and_tablets_commands(
    emu: Emulator, capsys: pytest.CaptureFixture[str], cassandra_session: Any
) -> None:
    """bootstrap-node and tablets split/change work against private metadata keyspaces."""
    meta = [f"--vnodes-keyspace={emu.keyspace}", f"--tablets-keyspace={emu.keyspace}"]
    tablets_ks = f"{emu.keyspace}_tab"
    try:
        assert (
            cli.main(
                [
                    "sim",
                    "exec",
                    *meta,
                    f"CREATE KEYSPACE {tablets_ks} WITH replication = {{'class':"
                    " 'SimpleStrategy', 'replication_factor': 1} AND tablets = {'enabled': true, 'initial': 2}",
                ]
            )
            == 0
        )
        assert (
            cli.main(
                [
                    "sim",
                    "exec",
                    *meta,
                    f"CREATE TABLE {tablets_ks}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}",
                ]
            )
            == 0
        )
        assert cli.main(["sim", "bootstrap-node", *meta, "--delay", "1", "--vnodes", "3"]) == 0
        assert "11 vnodes" in capsys.readouterr().out  # the first generation has 8
        assert cli.main(["sim", "tablets", "split", *meta, tablets_ks, "t", "--delay", "1"]) == 0
        assert "4 streams" in capsys.readouterr().out
        assert cli.main(["sim", "tablets", "change", *meta, tablets_ks, "t", "--positions", "9"]) == 2
        assert "no tablet at position 9" in capsys.readouterr().err
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {tablets_ks}", timeout=60)


def test_mixed_load_and_bulk_fill(emu: Emulator) -> None:
    """The mix runs every kind of operation through the emulator; bulk fills exactly N changes."""
    spec = LoadSpec(
        emu.keyspace or "",
        tables=2,
        rate=2000,
        duration_s=30,
        operations=60,
        seed=4,
        mix=parse_mix("insert=2,update=2,collection=1,delete=1,range_delete=1,partition_delete=1,batch=1"),
    )
    generator = LoadGenerator(emu, spec)
    generator.prepare()
    report = generator.run()
    assert report.operations == 60 and report.records >= 60 and report.rows > report.records
    assert count(emu, "load_0_scylla_cdc_log") + count(emu, "load_1_scylla_cdc_log") == report.rows
    parallel = LoadGenerator(
        emu, LoadSpec(emu.keyspace or "", tables=2, rate=2000, duration_s=30, operations=41, workers=3, seed=5)
    )
    assert parallel.run().operations == 41
    bulk = bulk_fill(emu, emu.keyspace or "", "bulk", 1234, partitions=100, chunk=500)
    assert bulk.records == bulk.rows == 1234
    assert count(emu, "bulk_scylla_cdc_log") == 1234 and count(emu, "bulk") == 1234
