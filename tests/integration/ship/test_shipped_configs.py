"""The shipped configurations run a real worker: docker-compose's init CQL and bridge settings (with
the service's environment), and the Helm chart's rendered worker.properties with the pod's
environment, each on the local stack with only the addresses (and the emulator's metadata
keyspaces) changed. The worker becomes ready on the probe paths the chart and the image use, and
delivers a change."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import CLI, free_port, http_get, read_topic, wait_for
from tests.ship.k8s import template
from tests.ship.tools import REPO

COMPOSE = REPO / "docker-compose.yml"


@pytest.fixture
def emulator(stack: Endpoints) -> Iterator[Emulator]:
    with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
        yield emu


@pytest.fixture
def unique() -> str:
    return f"ship{uuid.uuid4().hex[:10]}"


def _local_overrides(stack: Endpoints, unique: str, table: str, port: int) -> list[str]:
    sim = SimSettings()
    overrides = {
        "name": unique, "topic.prefix": unique, "scylla.table.names": table, "metrics.port": str(port),
        "scylla.cluster.ip.addresses": f"{stack.cassandra_host}:{stack.cassandra_port}",
        "kafka.bootstrap.servers": stack.kafka_bootstrap,
        # Cassandra cannot host ScyllaDB's system tables: the emulator's keyspaces (design.md 4.2)
        "scylla.cdc.metadata.vnodes.keyspace": sim.vnodes_keyspace,
        "scylla.cdc.metadata.tablets.keyspace": sim.tablets_keyspace,
    }
    return [item for key, value in overrides.items() for item in ("--set", f"{key}={value}")]


def _run_until_delivered(config: Path, args: list[str], env: dict[str, str], port: int, log: Path,
                         emulator: Emulator, insert: str, stack: Endpoints, topic: str,
                         while_running: Callable[[], None] = lambda: None) -> dict[str, Any]:
    with log.open("wb") as out:
        process = subprocess.Popen([*CLI, "run", "--config", str(config), *args], stdout=out,
                                   stderr=subprocess.STDOUT, env=os.environ | env)
    try:
        wait_for(lambda: http_get(port, "/readyz")[0] == 200 or process.poll() is not None, 90,
                 "the worker to answer /readyz with 200")
        assert process.poll() is None, log.read_text()[-3000:]
        assert http_get(port, "/healthz")[0] == 200
        emulator.execute(insert)
        [(_key, value)] = read_topic(stack.kafka_bootstrap, topic, expected=1, settle_s=1)
        assert value is not None
        while_running()
        envelope: dict[str, Any] = json.loads(value)
        return envelope.get("payload", envelope)
    finally:
        process.kill()
        process.wait(10)


def test_compose_init_and_bridge_settings_deliver_a_change(
    emulator: Emulator, stack: Endpoints, unique: str, tmp_path: Path,
) -> None:
    compose = yaml.safe_load(COMPOSE.read_text())["services"]
    init = compose["scylla-init"]
    cql_file = next(REPO / v.split(":")[0] for v in init["volumes"] if v.split(":")[1] == init["entrypoint"][-1])
    cql = re.sub(r"--[^\n]*", "", cql_file.read_text())
    statements = [s.strip() for s in re.sub(r"\bdemo\b", unique, cql).split(";") if s.strip()]
    for statement in statements:  # ScyllaDB DDL (NetworkTopologyStrategy, tablets off) through the emulator
        emulator.execute(statement)
    try:
        bridge = compose["bridge"]
        mounted = {v.split(":")[1]: REPO / v.split(":")[0] for v in bridge["volumes"]}
        config = mounted[bridge["command"][bridge["command"].index("--config") + 1]]
        env = {key: re.sub(r"\$\{(\w+):-([^}]*)\}", r"\2", str(value)) for key, value in bridge["environment"].items()}
        port = free_port()
        payload = _run_until_delivered(
            config, _local_overrides(stack, unique, f"{unique}.orders", port), env, port, tmp_path / "compose.log",
            emulator, f"INSERT INTO {unique}.orders (customer, order_id, product, quantity) "
            "VALUES ('Tim', 1, 'apple', 2)", stack, f"{unique}.{unique}.orders")
        assert payload["op"] == "c"
        assert payload["after"]["product"] == {"value": "apple"}
    finally:
        emulator.execute(f"DROP KEYSPACE IF EXISTS {unique}")


def test_helm_rendered_config_starts_a_ready_static_member(
    emulator: Emulator, stack: Endpoints, unique: str, tmp_path: Path,
) -> None:
    port = free_port()
    rendered = template(sets=[f"metrics.port={port}"])
    properties = tmp_path / "worker.properties"
    properties.write_text(rendered.one("ConfigMap")["data"]["worker.properties"])
    container = rendered.one("StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    pod_name = "cdc-scylla-cdc-bridge-0"
    env = {item["name"]: item.get("value", pod_name) for item in container["env"]}
    assert env["CDC_BRIDGE_WORKER_INSTANCE_ID"] == pod_name
    named_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named_ports[container["readinessProbe"]["httpGet"]["port"]] == port

    emulator.execute(f"CREATE KEYSPACE {unique} WITH replication = "
                     "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        emulator.execute(f"CREATE TABLE {unique}.t (pk int PRIMARY KEY, v text) WITH cdc = {{'enabled': true}}")
        members: list[Any] = []

        def slot_group_members() -> None:
            group = f"{unique}-workers"
            admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})  # kept alive until the answer
            members.extend(admin.describe_consumer_groups([group])[group].result(timeout=30).members)

        payload = _run_until_delivered(
            properties, _local_overrides(stack, unique, f"{unique}.t", port), env, port, tmp_path / "helm.log",
            emulator, f"INSERT INTO {unique}.t (pk, v) VALUES (1, 'x')", stack, f"{unique}.{unique}.t",
            while_running=slot_group_members)
        assert payload["op"] == "c" and payload["after"]["v"] == {"value": "x"}
        assert [m.group_instance_id for m in members] == [pod_name], "the pod name is the static member id"
    finally:
        emulator.execute(f"DROP KEYSPACE IF EXISTS {unique}")
