"""Shared fixtures. Integration tests get real Kafka, Cassandra and registry clients on the local
stack; each test gets its own topic and keyspace names so tests never see each other's data."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bridge_devstack.stack.layout import Endpoints
from bridge_devstack.stack.manager import StackManager


def _unique(request: pytest.FixtureRequest, prefix: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:24]
    return f"{prefix}_{base}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def stack() -> Iterator[Endpoints]:
    """The running local stack; started here (and stopped after the session) if it is not up."""
    manager = StackManager.default()
    started = manager.up(quiet=True)
    try:
        yield manager.endpoints
    finally:
        if started:
            manager.down(only=started)


# ---------------------------------------------------------------- Cassandra


@pytest.fixture(scope="session")
def cassandra_cluster(stack: Endpoints) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([stack.cassandra_host], port=stack.cassandra_port, protocol_version=5)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="session")
def cassandra_session(cassandra_cluster: Any) -> Any:
    return cassandra_cluster.connect()


@pytest.fixture
def keyspace(request: pytest.FixtureRequest, cassandra_session: Any) -> Iterator[str]:
    """A fresh keyspace (SimpleStrategy, RF 1) for this test, dropped afterwards."""
    name = _unique(request, "ks")
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    try:
        yield name
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


# ---------------------------------------------------------------- Kafka


@pytest.fixture(scope="session")
def kafka_bootstrap(stack: Endpoints) -> str:
    return stack.kafka_bootstrap


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A unique topic name for this test (not created; see `make_topic`)."""
    return _unique(request, "t").replace("_", "-")


@pytest.fixture
def make_topic(kafka_admin: Any) -> Iterator[Callable[..., str]]:
    """Create a topic and wait until it exists; every topic made here is deleted afterwards."""
    from confluent_kafka.admin import NewTopic

    created: list[str] = []

    def create(name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        futures = kafka_admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
        )
        futures[name].result(timeout=30)
        created.append(name)
        return name

    yield create
    if created:
        for future in kafka_admin.delete_topics(created).values():
            future.result(timeout=30)


@pytest.fixture
def make_consumer(kafka_bootstrap: str) -> Iterator[Callable[..., Any]]:
    """Consumers reading from the beginning with read_committed; all closed afterwards."""
    from confluent_kafka import Consumer

    consumers: list[Any] = []

    def create(**overrides: Any) -> Any:
        config = {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
        config.update(overrides)
        consumer = Consumer(config)
        consumers.append(consumer)
        return consumer

    yield create
    for consumer in consumers:
        consumer.close()


# ---------------------------------------------------------------- schema registry


@pytest.fixture(scope="session")
def schema_registry_url(stack: Endpoints) -> str:
    """The Confluent-compatible API of the local Apicurio registry."""
    return stack.schema_registry_url


_TIER_BY_FOLDER = {"unit": "unit", "integration": "integration", "spark": "spark", "ship": "ship"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test carries the marker of its tier folder, so `-m unit` etc. select a tier."""
    for item in items:
        parts = item.path.parts
        for folder, marker in _TIER_BY_FOLDER.items():
            if folder in parts:
                item.add_marker(getattr(pytest.mark, marker))
