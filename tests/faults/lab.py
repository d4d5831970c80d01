"""The fault lab: a 3-node Kafka cluster and toxiproxy beside the local stack, and two workers
(`WA`, `WB`) whose every link (to each broker, to Cassandra, to the registry) passes through a
proxy of its own, so one worker's link can be cut or slowed while the other's is not. The test's
own reads use the cluster's direct listener (`TEST`) and are never faulted."""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from confluent_kafka.admin import AdminClient

from bridge_devstack.stack import toxiproxy
from bridge_devstack.stack.kafka_cluster import ClusterClient, ClusterPorts, KafkaCluster
from bridge_devstack.stack.layout import Endpoints, StackLayout, port_offset
from bridge_devstack.stack.toxiproxy import Proxy, Toxiproxy
from tests.integration.worker.harness import read_topic, worker_properties

WORKERS = ("WA", "WB")
CLIENTS = [ClusterClient("TEST", proxied=False), *(ClusterClient(name, proxied=True) for name in WORKERS)]
BASE = port_offset(25000)  # cluster 25010-25135, toxiproxy API 25200, service proxies 25210+


@dataclass
class FaultLab:
    stack: Endpoints
    cluster: KafkaCluster
    proxies: Toxiproxy
    kafka: dict[str, list[Proxy]] = field(default_factory=dict)
    cassandra: dict[str, Proxy] = field(default_factory=dict)
    registry: dict[str, Proxy] = field(default_factory=dict)

    @classmethod
    def start(cls, stack: Endpoints, home: Path) -> FaultLab:
        layout = StackLayout.default()
        cluster = KafkaCluster(layout.home("kafka") / "lib", layout.recipe("kafka"), home / "kafka",
                               ClusterPorts(BASE), CLIENTS)
        proxies = Toxiproxy(toxiproxy.install(layout.state_dir), home / "toxiproxy", BASE + 200)
        lab = cls(stack, cluster, proxies)
        try:
            proxies.start()
            cluster.start()
            lab._wire()
        except BaseException:
            lab.stop()
            raise
        return lab

    def _wire(self) -> None:
        registry = urlsplit(self.stack.schema_registry_url)
        ports = itertools.count(BASE + 210)
        for index, worker in enumerate(WORKERS, start=1):
            self.kafka[worker] = [
                self.proxies.proxy(f"kafka-{worker}-{node}", self.cluster.ports.proxied(node, index),
                                   self.cluster.upstream(node, worker))
                for node in self.cluster.nodes
            ]
            self.cassandra[worker] = self.proxies.proxy(
                f"cassandra-{worker}", next(ports), f"{self.stack.cassandra_host}:{self.stack.cassandra_port}")
            self.registry[worker] = self.proxies.proxy(f"registry-{worker}", next(ports),
                                                       f"{registry.hostname}:{registry.port}")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.cluster.stop()
        self.proxies.stop()

    # ------------------------------------------------------------------ for the scenarios

    def properties(self, worker: str, name: str, tables: list[str], **extra: object) -> dict[str, str]:
        """A worker's settings with every link through its proxies."""
        props = worker_properties(self.stack, name, tables, **extra)
        props["kafka.bootstrap.servers"] = self.cluster.bootstrap(worker)
        props["scylla.cluster.ip.addresses"] = self.cassandra[worker].address
        return props

    def registry_url(self, worker: str) -> str:
        path = urlsplit(self.stack.schema_registry_url).path
        return f"http://{self.registry[worker].address}{path}"

    @property
    def bootstrap(self) -> str:
        """The test's own, never faulted, way in."""
        return self.cluster.bootstrap("TEST")

    def read(self, topic: str, expected: int, timeout_s: float = 180.0) -> list[tuple[bytes | None, bytes | None]]:
        return read_topic(self.bootstrap, topic, expected=expected, timeout_s=timeout_s, settle_s=5)

    def kafka_link(self, worker: str, up: bool) -> None:
        for proxy in self.kafka[worker]:
            proxy.enable(up)

    def leader_of(self, topic: str, partition: int = 0) -> int:
        metadata = self._admin().list_topics(topic, timeout=10)
        return int(metadata.topics[topic].partitions[partition].leader)

    def coordinator_of(self, group: str) -> int:
        admin = self._admin()  # held until the answer: a client collected meanwhile never answers
        description = admin.describe_consumer_groups([group], request_timeout=20)[group].result(timeout=30)
        return int(description.coordinator.id)

    def heal(self) -> None:
        """Every link up and clean, every node running: the next scenario starts healthy."""
        for proxy in [*itertools.chain(*self.kafka.values()), *self.cassandra.values(), *self.registry.values()]:
            proxy.enable()
            proxy.clear()
        for node in self.cluster.nodes:
            with contextlib.suppress(Exception):
                self.cluster.resume(node)
            self.cluster.start_node(node)
        self.cluster.wait_ready()

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
