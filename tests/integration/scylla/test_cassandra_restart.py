"""Cassandra killed (SIGKILL, by its pid from the stack's pid file) and started again while the
source reads: the reader backs off, recovers and hands on every record exactly once."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.scylla.events import GroupRetrying
from bridge.scylla.model import ChangeRecord
from bridge.scylla.reader import SourceReader
from bridge.sim import Emulator
from bridge.sim.settings import SimSettings
from bridge.stack.manager import StackManager
from tests.integration.scylla.harness import Collected, run_reader, settings_for


@pytest.fixture
def restartable_cassandra(cassandra_session: Any) -> Iterator[tuple[StackManager, int]]:
    """The stack's Cassandra pid; whatever happens in the test, Cassandra is up again after it,
    and the shared test session has reconnected (its driver backs off between attempts)."""
    manager = StackManager.default()
    pid = manager.pid_of(manager.service("cassandra"))
    assert pid is not None, "the stack's Cassandra is not running"
    try:
        yield manager, pid
    finally:
        manager.up(quiet=True, only=["cassandra"])
        for host in cassandra_session.cluster.metadata.all_hosts():
            cassandra_session.cluster.on_up(host)
        wait_for_cql(cassandra_session)


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


@pytest.fixture
def own_session(stack: Any) -> Iterator[Any]:
    """A session of its own that retries connections every half second (the reader's and the
    writer's), so recovery time reflects the reader, not the driver's reconnection backoff."""
    from cassandra.cluster import Cluster
    from cassandra.policies import ConstantReconnectionPolicy

    cluster = Cluster([stack.cassandra_host], port=stack.cassandra_port, protocol_version=5,
                      reconnection_policy=ConstantReconnectionPolicy(0.5, None))
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def write(emu: Emulator, keyspace: str, start: int, count: int) -> list[ChangeRecord]:
    written: list[ChangeRecord] = []
    for i in range(start, start + count):
        written += emu.execute(f"UPDATE {keyspace}.t SET v = {i} WHERE pk = {i % 13}")
        time.sleep(0.01)
    return written


@pytest.mark.slow
def test_reader_recovers_from_a_cassandra_restart_without_loss_or_duplicate(
    own_session: Any, keyspace: str, restartable_cassandra: tuple[StackManager, int]
) -> None:
    manager, pid = restartable_cassandra
    emu = Emulator(own_session, SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace))
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    reader = SourceReader(own_session, settings_for(keyspace, request_timeout_ms=3000, backoff_max_ms=3000))
    collected = Collected()
    try:
        reader.watch_table(keyspace, "t")
        written = write(emu, keyspace, 0, 150)
        # read part of it, then kill Cassandra while the rest is still inside the confidence window
        run_reader(reader, lambda c: len(c.records()) > 20, timeout_s=30, collected=collected)
        os.kill(pid, signal.SIGKILL)
        run_reader(reader, lambda c: bool(c.of(GroupRetrying)), timeout_s=60, collected=collected)
        time.sleep(2)
        manager.up(quiet=True, only=["cassandra"])
        wait_for_cql(own_session)
        written += write(emu, keyspace, 150, 100)
        until = max(r.micros for r in written) + 1
        run_reader(
            reader,
            lambda c: all(c.progress_of(g) >= until for g in c.started) and len(c.records()) >= len(written),
            timeout_s=120, collected=collected,
        )
    finally:
        reader.close()
    read = [(e.record.stream_id, e.record.time) for e in collected.records()]
    assert len(read) == len(set(read)), "a record was handed on twice"
    assert sorted(read) == sorted((r.stream_id, r.time) for r in written)
