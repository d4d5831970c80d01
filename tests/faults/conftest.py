"""The fault tier: scenarios against a 3-node Kafka cluster and toxiproxy (tests/faults/lab.py),
each ending with the exactly-once check. Marked `faults` (and `slow`); the README's test command
runs them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.faults.lab import FaultLab
from tests.integration.worker.harness import WorkerProcess, start_worker, write_properties


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/faults/" in str(item.path):
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="package")  # its four servers stop when the fault tier ends, not with the session
def lab(stack: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultLab]:
    lab = FaultLab.start(stack, tmp_path_factory.mktemp("fault-lab"))
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def healthy_lab(lab: FaultLab) -> Iterator[FaultLab]:
    """The lab, healed after the scenario whatever it left broken."""
    try:
        yield lab
    finally:
        lab.heal()


@pytest.fixture
def emulator(stack: Endpoints) -> Iterator[Emulator]:
    with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
        yield emu


@pytest.fixture
def lab_workers(healthy_lab: FaultLab, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """start(worker, name, tables, **settings): a `cdc-bridge run` on `worker`'s links (with a wall
    clock `clock_skew_s` off, if given); every one started is killed (by pid) after the test."""
    started: list[WorkerProcess] = []

    def start(worker: str, name: str, tables: list[str], clock_skew_s: float = 0.0,
              **settings: object) -> WorkerProcess:
        config = write_properties(tmp_path / f"{worker}.properties",
                                  healthy_lab.properties(worker, name, tables, **settings))
        launcher = [sys.executable, str(Path(__file__).parent / "skewed_clock.py"), str(clock_skew_s)]
        process = start_worker(config, tmp_path, worker, launcher=launcher if clock_skew_s else None)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
