"""Where the local stack keeps its files, and where its services listen."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[3]


def port_offset(private: int = 0) -> int:
    """$CDC_BRIDGE_STACK_PORT_OFFSET, plus `private` for a test's own stack beside it: the one
    setting every command and test derives its ports from, so two test runs with different
    offsets never share a port."""
    return int(os.environ.get("CDC_BRIDGE_STACK_PORT_OFFSET", "0")) + private


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Addresses of the running local stack, for clients and tests."""

    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    kafka_tls_port: int = 9094  # the secured stack's TLS (client certificate) listener
    cassandra_port: int = 9042
    cassandra_storage_port: int = 7000
    registry_port: int = 8080
    # the optional Spark standalone cluster (devstack/bridge_devstack/stack/spark_cluster.py); worker N listens on
    # spark_worker_port + N - 1 and serves its UI on spark_worker_ui_port + N - 1
    spark_master_port: int = 7077
    spark_master_ui_port: int = 8090
    spark_worker_port: int = 7078
    spark_worker_ui_port: int = 8091
    host: str = "127.0.0.1"

    @classmethod
    def from_env(cls) -> Endpoints:
        """Default ports, all shifted by $CDC_BRIDGE_STACK_PORT_OFFSET (to run a second stack beside one)."""
        return cls().shifted(port_offset())

    def shifted(self, offset: int) -> Endpoints:
        return Endpoints(
            kafka_port=self.kafka_port + offset,
            kafka_controller_port=self.kafka_controller_port + offset,
            kafka_tls_port=self.kafka_tls_port + offset,
            cassandra_port=self.cassandra_port + offset,
            cassandra_storage_port=self.cassandra_storage_port + offset,
            registry_port=self.registry_port + offset,
            spark_master_port=self.spark_master_port + offset,
            spark_master_ui_port=self.spark_master_ui_port + offset,
            spark_worker_port=self.spark_worker_port + offset,
            spark_worker_ui_port=self.spark_worker_ui_port + offset,
            host=self.host,
        )

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def cassandra_host(self) -> str:
        return self.host

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self.host}:{self.spark_master_port}"

    @property
    def schema_registry_url(self) -> str:
        """Apicurio's Confluent-compatible API."""
        return f"http://{self.host}:{self.registry_port}/apis/ccompat/v7"


@dataclass(frozen=True, slots=True)
class StackLayout:
    """`deploy_dir` holds the checked-in recipes (POMs, config templates); `state_dir` the
    git-ignored downloads, data, logs and pid files."""

    deploy_dir: Path
    state_dir: Path

    @classmethod
    def default(cls) -> StackLayout:
        deploy = os.environ.get("CDC_BRIDGE_DEPLOY_DIR")
        state = os.environ.get("CDC_BRIDGE_STACK_DIR")
        return cls(
            deploy_dir=Path(deploy) if deploy else _REPO_ROOT / "deploy" / "local",
            state_dir=Path(state) if state else _REPO_ROOT / ".stack",
        )

    def recipe(self, service: str) -> Path:
        return self.deploy_dir / service

    def home(self, service: str) -> Path:
        return self.state_dir / service
