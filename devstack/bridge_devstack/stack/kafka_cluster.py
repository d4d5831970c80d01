"""A 3-node Apache Kafka cluster in KRaft mode (replication factor 3, `min.insync.replicas=2`) for
the fault tests, run from the local stack's own Kafka jars: nodes are SIGKILLed, paused
(SIGSTOP) and restarted by pid while workers run against it. Every client gets a listener of its
own on each node; a proxied client's listener is advertised as its toxiproxy proxy's address, so
after bootstrap its connections to any broker still pass through its proxies."""

from __future__ import annotations

import base64
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from string import Template

from bridge_devstack.stack.process import (
    PidFile,
    StackError,
    log_tail,
    pid_alive,
    run_checked,
    spawn,
    terminate,
    wait_ports_free,
)


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in unpadded base64url, as Kafka's `Uuid.randomUuid`
    makes it, never starting with '-' (the storage tool would read such an id as an option and
    fail: 1 format in 64; seen in CI)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class ClusterPorts:
    """Ports from `base`: node n (1-based) has base+10n (brokers), +1 (controller), +2+i (client
    i's listener); client i's proxy to node n listens on base+100+10n+i."""

    base: int

    def internal(self, node: int) -> int:
        return self.base + 10 * node

    def controller(self, node: int) -> int:
        return self.base + 10 * node + 1

    def listener(self, node: int, client: int) -> int:
        return self.base + 10 * node + 2 + client

    def proxied(self, node: int, client: int) -> int:
        return self.base + 100 + 10 * node + client


@dataclass(frozen=True)
class ClusterClient:
    name: str  # upper-case letters: it names the listener
    proxied: bool  # advertised through its proxies (a worker) or directly (the test's own reads)


class KafkaCluster:
    def __init__(self, kafka_lib: Path, recipe: Path, home: Path, ports: ClusterPorts,
                 clients: list[ClusterClient], size: int = 3, heap: str = "512m") -> None:
        self.kafka_lib, self.recipe, self.home, self.ports = kafka_lib, recipe, home, ports
        self.clients, self.nodes, self.heap = clients, range(1, size + 1), heap

    def bootstrap(self, client: str) -> str:
        """The bootstrap servers of `client`: its proxies' addresses, or its listeners'."""
        index, spec = self._client(client)
        port = self.ports.proxied if spec.proxied else self.ports.listener
        return ",".join(f"127.0.0.1:{port(node, index)}" for node in self.nodes)

    def upstream(self, node: int, client: str) -> str:
        """What `client`'s proxy to `node` forwards to."""
        return f"127.0.0.1:{self.ports.listener(node, self._client(client)[0])}"

    def start(self, timeout_s: float = 90.0) -> None:
        self._prepare()
        for node in self.nodes:
            self.start_node(node)
        self.wait_ready(timeout_s)

    def start_node(self, node: int) -> None:
        if self._alive(node) is not None:
            return
        # A node started while one of its ports is still taken dies at its listeners' bind, which
        # nothing here would see until the cluster fails to form: say which port instead.
        busy = wait_ports_free("127.0.0.1", self._node_ports(node), timeout_s=15)
        if busy is not None:
            raise StackError(f"Kafka node {node} cannot start: port {busy} is still taken")
        log = self._node_home(node) / "kafka.log"
        command = ["java", f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                   f"-Dlog4j2.configurationFile={self.recipe / 'log4j2.properties'}",
                   "-cp", f"{self.kafka_lib}/*", "kafka.Kafka", str(self._config(node))]
        PidFile(self._pid_path(node)).write(spawn(command, self._node_home(node), log))

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        """Until every node is registered as a broker."""
        from confluent_kafka.admin import AdminClient

        direct = next(c.name for c in self.clients if not c.proxied)
        admin = AdminClient({"bootstrap.servers": self.bootstrap(direct), "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if len(admin.list_topics(timeout=3).brokers) == len(self.nodes):
                    return
            except Exception:  # any client error simply means "not ready yet"
                time.sleep(0.5)
        logs = "\n".join(log_tail(self._node_home(n) / "kafka.log", 5) for n in self.nodes)
        raise StackError(f"the Kafka cluster did not form in {timeout_s:.0f} s:\n{logs}")

    def describe(self) -> str:
        """Each node running or not, with the last lines of a stopped node's log: for failure reports."""
        lines = []
        for node in self.nodes:
            pid = self._alive(node)
            lines.append(f"node {node}: running (pid {pid})" if pid is not None else
                         f"node {node}: not running; its log ends:\n{log_tail(self._node_home(node) / 'kafka.log', 8)}")
        return "\n".join(lines)

    def kill(self, node: int) -> None:
        """SIGKILL: the broker and controller vanish at once, as on a machine failure."""
        pid = self._alive(node)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            while pid_alive(pid, self._marker(node)):
                time.sleep(0.1)
        PidFile(self._pid_path(node)).remove()

    def pause(self, node: int) -> None:
        """SIGSTOP: the process keeps its sockets open and answers nothing (a long GC pause, a hung VM)."""
        os.kill(self._pid(node), signal.SIGSTOP)

    def resume(self, node: int) -> None:
        os.kill(self._pid(node), signal.SIGCONT)

    def stop(self) -> None:
        for node in self.nodes:
            pid = PidFile(self._pid_path(node)).read()
            if pid is not None and pid_alive(pid, self._marker(node)):
                os.kill(pid, signal.SIGCONT)  # a paused node would not see the SIGTERM
                terminate(pid, self._marker(node), grace_s=5)
            PidFile(self._pid_path(node)).remove()

    # ------------------------------------------------------------------ internals

    def _client(self, name: str) -> tuple[int, ClusterClient]:
        return next((i, c) for i, c in enumerate(self.clients) if c.name == name)

    def _node_home(self, node: int) -> Path:
        return self.home / f"node-{node}"

    def _config(self, node: int) -> Path:
        return self._node_home(node) / "server.properties"

    def _node_ports(self, node: int) -> list[int]:
        listeners = [self.ports.listener(node, index) for index in range(len(self.clients))]
        return [self.ports.internal(node), self.ports.controller(node), *listeners]

    def _pid_path(self, node: int) -> Path:
        return self._node_home(node) / "kafka.pid"

    def _marker(self, node: int) -> str:
        return str(self._config(node))

    def _alive(self, node: int) -> int | None:
        pid = PidFile(self._pid_path(node)).read()
        return pid if pid is not None and pid_alive(pid, self._marker(node)) else None

    def _pid(self, node: int) -> int:
        pid = self._alive(node)
        if pid is None:
            raise StackError(f"Kafka node {node} is not running")
        return pid

    def _prepare(self) -> None:
        id_file = self.home / "cluster.id"
        self.home.mkdir(parents=True, exist_ok=True)
        if not id_file.exists():
            id_file.write_text(new_cluster_id())
        cluster_id = id_file.read_text().strip()
        voters = ",".join(f"{n}@127.0.0.1:{self.ports.controller(n)}" for n in self.nodes)
        for node in self.nodes:
            data = self._node_home(node) / "data"
            data.mkdir(parents=True, exist_ok=True)
            listeners = [(c.name, self.ports.listener(node, i),
                          self.ports.proxied(node, i) if c.proxied else self.ports.listener(node, i))
                         for i, c in enumerate(self.clients)]
            values = {
                "node_id": node, "voters": voters, "internal_port": self.ports.internal(node),
                "controller_port": self.ports.controller(node), "data_dir": data,
                "client_listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port, _ in listeners),
                "advertised_client_listeners": ",".join(f"{name}://127.0.0.1:{ad}" for name, _, ad in listeners),
                "client_protocols": ",".join(f"{name}:PLAINTEXT" for name, _, _ in listeners),
            }
            template = Template((self.recipe / "cluster-node.properties.in").read_text())
            self._config(node).write_text(template.substitute({k: str(v) for k, v in values.items()}))
            if not (data / "meta.properties").exists():
                command = ["java", "-Xmx256m", "-cp", f"{self.kafka_lib}/*", "kafka.tools.StorageTool",
                           "format", "-t", cluster_id, "-c", str(self._config(node))]
                run_checked(command, f"formatting Kafka node {node}'s storage", " ".join(command))
