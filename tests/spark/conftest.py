"""The Spark tier: one local[2] SparkSession for the whole test session (its start, with the
Kafka and Delta packages from the Ivy cache, takes the longest), the emulator, and the stack's
Spark standalone cluster for the tests that ask for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.spark_cluster import SPARK_CLUSTER


@pytest.fixture(scope="session")
def spark(stack: Endpoints) -> Iterator[Any]:
    from bridge.spark.core.session import build_session
    from tests.spark.jobs import TEST_JVM_OPTIONS

    session = build_session("local[2]", app_name="cdc-bridge-tests",
                            conf={"spark.driver.extraJavaOptions": TEST_JVM_OPTIONS})
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def emulator(stack: Endpoints) -> Iterator[Emulator]:
    with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
        yield emu


@pytest.fixture(scope="session")
def spark_cluster(stack: Endpoints) -> Iterator[str]:
    """The master URL of the stack's Spark standalone cluster (a master and two 1-core workers);
    started here (and stopped after the session) if it is not up."""
    manager = StackManager.default(spark_cluster=True)
    started = manager.up(quiet=True, only=SPARK_CLUSTER)
    try:
        yield manager.endpoints.spark_master_url
    finally:
        if started:
            manager.down(only=started)
