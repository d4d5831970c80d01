"""Cassandra killed (SIGKILL, by the pid in its pid file) and started again while the source
reads: the reader backs off, recovers and hands on every record of the log exactly once.

The Cassandra killed here is a private one (own state folder, ports shifted), started for this
test only: killing the shared stack's Cassandra in the middle of another test's schema change can
leave its schema tables unreadable at the next start."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.scylla.events import GroupRetrying
from bridge.scylla.model import ChangeRecord
from bridge.scylla.reader import SourceReader
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.stack.layout import Endpoints, StackLayout, port_offset
from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.process import pid_alive, port_open, terminate
from tests.integration.scylla.harness import Collected, run_reader, settings_for

PORT_OFFSET = port_offset(21000)  # beside the run's own stack, whatever its offset


@pytest.fixture
def private_cassandra(tmp_path: Path) -> Iterator[StackManager]:
    """A Cassandra of this test's own, stopped afterwards: by its pid file, and by the pid of any
    process still running from this test's own state folder (a start that the stack manager
    wrongly judged failed leaves no pid file)."""
    state_dir = tmp_path / "stack"
    layout = StackLayout(deploy_dir=StackLayout.default().deploy_dir, state_dir=state_dir)
    manager = StackManager(layout, Endpoints().shifted(PORT_OFFSET), say=lambda _: None)
    try:
        manager.up(quiet=True, only=["cassandra"])
        yield manager
    finally:
        manager.down(only=["cassandra"])
        service = manager.service("cassandra")
        for pid in pids_running_from(state_dir, service.main_marker):
            terminate(pid, service.main_marker, service.stop_grace_s)


def pids_running_from(folder: Path, marker: str) -> list[int]:
    """Processes whose command line names `folder` (unique to this test) and `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in cmdline and marker in cmdline:
            found.append(int(entry.name))
    return found


def restart(manager: StackManager, killed_pid: int) -> None:
    """Start Cassandra again once the killed one is gone and its port closed."""
    service = manager.service("cassandra")
    port = manager.endpoints.cassandra_port
    deadline = time.monotonic() + 60
    while pid_alive(killed_pid, service.main_marker) or port_open("127.0.0.1", port):
        assert time.monotonic() < deadline, "the killed Cassandra did not go away"
        time.sleep(0.2)
    manager.up(quiet=True, only=["cassandra"])


@pytest.fixture
def session(private_cassandra: StackManager) -> Iterator[Any]:
    """A session that retries connections every half second, so recovery time reflects the
    reader, not the driver's reconnection backoff (which grows to minutes by default)."""
    from cassandra.cluster import Cluster
    from cassandra.policies import ConstantReconnectionPolicy

    endpoints = private_cassandra.endpoints
    cluster = Cluster([endpoints.cassandra_host], port=endpoints.cassandra_port, protocol_version=5,
                      reconnection_policy=ConstantReconnectionPolicy(0.5, None))
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def wait_for_cql(session: Any, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    while True:
        try:
            session.execute("SELECT release_version FROM system.local")
            return
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def write(emu: Emulator, keyspace: str, start: int, count: int) -> list[ChangeRecord]:
    written: list[ChangeRecord] = []
    for i in range(start, start + count):
        written += emu.execute(f"UPDATE {keyspace}.t SET v = {i} WHERE pk = {i % 13}")
        time.sleep(0.01)
    return written


@pytest.mark.slow
def test_reader_recovers_from_a_cassandra_restart_without_loss_or_duplicate(
    private_cassandra: StackManager, session: Any
) -> None:
    keyspace = "restart_test"
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    emu = Emulator(session, SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace))
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    reader = SourceReader(session, settings_for(keyspace, request_timeout_ms=3000, backoff_max_ms=3000))
    collected = Collected()
    try:
        reader.watch_table(keyspace, "t")
        written = write(emu, keyspace, 0, 150)
        # read part of it, then kill Cassandra while the rest is still inside the confidence window
        run_reader(reader, lambda c: len(c.records()) > 20, timeout_s=30, collected=collected)
        pid = private_cassandra.pid_of(private_cassandra.service("cassandra"))
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        run_reader(reader, lambda c: bool(c.of(GroupRetrying)), timeout_s=60, collected=collected)
        time.sleep(2)
        restart(private_cassandra, pid)
        wait_for_cql(session)
        written += write(emu, keyspace, 150, 100)
        until = max(r.micros for r in written) + 1
        run_reader(
            reader,
            lambda c: all(c.progress_of(g) >= until for g in c.started),
            timeout_s=120, collected=collected,
        )
    finally:
        reader.close()
    read = [(e.record.stream_id, e.record.time) for e in collected.records()]
    assert len(read) == len(set(read)), "a record was handed on twice"
    # SIGKILL can lose writes Cassandra acknowledged in the last commit-log sync period (10 s,
    # periodic mode): the truth is what the log table holds after the restart.
    in_log = {(r.stream_id, r.time) for r in written if session.execute(
        f'SELECT "cdc$time" FROM {keyspace}.t_scylla_cdc_log WHERE "cdc$stream_id" = %s AND "cdc$time" = %s',
        (r.stream_id.raw, r.time)).one() is not None}
    assert len(in_log) > 200
    assert set(read) == in_log, f"{len(in_log - set(read))} records in the log table not handed on"
