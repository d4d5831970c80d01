"""Fixtures for tests that run real worker processes: every process started is stopped by pid."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import WorkerProcess, start_worker, worker_properties, write_properties


@pytest.fixture
def emulator(stack: Endpoints) -> Iterator[Emulator]:
    with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
        yield emu


@pytest.fixture
def private_emulator(cassandra_session: Any, keyspace: str) -> Iterator[Emulator]:
    """An emulator whose generations and stream sets live in the test's keyspace: a generation
    switch in the shared `sim_system_distributed` would reach every other test on the stack
    (devstack/bridge_devstack/sim/settings.py, `bootstrap_delay_s`)."""
    yield Emulator(cassandra_session, SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace))


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(config: Path, label: str, *extra: str) -> WorkerProcess:
        worker = start_worker(config, tmp_path, label, *extra)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def bridge_name(topic_name: str) -> str:
    return topic_name[:40]


@pytest.fixture
def config_for(tmp_path: Path, stack: Endpoints, bridge_name: str) -> Callable[..., Path]:
    def make(tables: list[str], **extra: object) -> Path:
        return write_properties(tmp_path / f"{bridge_name}.properties",
                                worker_properties(stack, bridge_name, tables, **extra))

    return make
