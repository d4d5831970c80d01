"""Fixtures of the emulator's integration tests: one keyspace per test module (schema changes are
slow, so tables are shared by the tests of a module, which use their own partition keys)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bridge_devstack.sim import Emulator, SimSettings


@pytest.fixture(scope="module")
def sim_keyspace(request: pytest.FixtureRequest, cassandra_session: Any) -> Iterator[str]:
    """A keyspace for this test module, dropped afterwards."""
    base = re.sub(r"[^a-z0-9]+", "_", request.module.__name__.split(".")[-1].lower())[:20]
    name = f"sim_{base}_{uuid.uuid4().hex[:8]}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    try:
        yield name
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


@pytest.fixture(scope="module")
def emu(cassandra_session: Any, sim_keyspace: str) -> Emulator:
    """An emulator on the shared session, `USE`-ing the module's keyspace, default metadata keyspaces."""
    return Emulator(cassandra_session, SimSettings(), keyspace=sim_keyspace)
