"""Kafka Connect standalone 4.1.1 with the Java scylla-cdc-source-connector, beside the bridge
(the differential tests in tests/integration/peer and bench/peer_bench.py).

- The connector jar is not on Maven Central: it is looked for in `$CDC_BRIDGE_STACK_PEER_DIR`
  (a stack variable, not a worker setting), default `../shared/peer/` beside the repository
  (`peer_jar`; None where it is absent).
- Connect's jars come from Maven Central through the stack's Maven fetch (`deploy/local/connect/
  pom.xml` into `<state>/connect/lib`).
- One standalone worker runs any number of connectors, added and removed over its REST API on
  `127.0.0.1:<8083 + port offset>` (`port_offset` of the caller); offsets in a file of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge_devstack.stack.layout import StackLayout
from bridge_devstack.stack.process import StackError
from bridge_devstack.stack.services import maven_fetch_dependencies

_REPO_ROOT = Path(__file__).resolve().parents[3]
PEER_DIR_ENV = "CDC_BRIDGE_STACK_PEER_DIR"
JAR_PATTERN = "scylla-cdc-source-connector-*-jar-with-dependencies.jar"
CONNECTOR_CLASS = "com.scylladb.cdc.debezium.connector.ScyllaConnector"
AVRO_CONVERTER_CLASS = "io.apicurio.registry.utils.converter.AvroConverter"
# The connector logs through flogger; without its system backend its own lines are lost.
_FLOGGER = "-Dflogger.backend_factory=com.google.common.flogger.backend.system.SimpleBackendFactory#getInstance"


def peer_dir() -> Path:
    configured = os.environ.get(PEER_DIR_ENV)
    return Path(configured) if configured else _REPO_ROOT.parent / "shared" / "peer"


def peer_jar() -> Path | None:
    """The connector's jar-with-dependencies in `peer_dir()`, or None if there is none."""
    found = sorted(peer_dir().glob(JAR_PATTERN))
    return found[-1] if found else None


def connect_lib(layout: StackLayout | None = None) -> Path:
    """Connect standalone's classpath folder, fetched from Maven Central once."""
    layout = layout or StackLayout.default()
    lib = layout.home("connect") / "lib"
    maven_fetch_dependencies(layout.recipe("connect") / "pom.xml", lib)
    return lib


def avro_converter_dir(layout: StackLayout | None = None) -> Path:
    """Apicurio's Avro converter and its jars, a plugin folder of their own, fetched once."""
    layout = layout or StackLayout.default()
    folder = layout.home("connect") / "apicurio-converter"
    maven_fetch_dependencies(layout.recipe("connect") / "avro" / "pom.xml", folder)
    return folder


def apicurio_avro_settings(prefix: str, registry_v2_url: str) -> dict[str, str]:
    """Settings of Apicurio's AvroConverter as `prefix` (`key.converter` / `value.converter`) that
    make it write what Confluent's does: a zero byte and the 4-byte id the ccompat API serves (the
    content id), no headers, subjects `<topic>-key` / `<topic>-value` (its TopicIdStrategy)."""
    return {
        prefix: AVRO_CONVERTER_CLASS,
        f"{prefix}.apicurio.registry.url": registry_v2_url,
        f"{prefix}.apicurio.registry.auto-register": "true",
        f"{prefix}.apicurio.registry.as-confluent": "true",
        f"{prefix}.apicurio.registry.headers.enabled": "false",
        f"{prefix}.apicurio.registry.use-id": "contentId",
        f"{prefix}.apicurio.registry.id-handler": "io.apicurio.registry.serde.Legacy4ByteIdHandler",
    }


@dataclass
class ConnectStandalone:
    """One Connect standalone JVM; `start`, `add`/`remove` connectors, `stop` (by pid)."""

    jar: Path
    lib: Path
    work_dir: Path
    bootstrap: str
    rest_port: int
    heap: str = "768m"
    plugins: tuple[Path, ...] = ()  # more plugin folders (a converter), beside the connector's jar
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def log_path(self) -> Path:
        return self.work_dir / "connect.log"

    def start(self, timeout_s: float = 120.0) -> None:
        plugins = self.work_dir / "plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        for source in (self.jar, *self.plugins):
            link = plugins / source.name
            if not link.exists():
                link.symlink_to(source.resolve())
        worker = self.work_dir / "worker.properties"
        worker.write_text(
            f"bootstrap.servers={self.bootstrap}\n"
            "key.converter=org.apache.kafka.connect.json.JsonConverter\n"
            "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
            f"offset.storage.file.filename={self.work_dir / 'offsets'}\n"
            "offset.flush.interval.ms=1000\n"
            f"plugin.path={plugins}\n"
            # Plugins found by scanning their classes alone (Connect's classic way); the default
            # hybrid_warn runs a service-loader pass over every plugin as well, which finds neither
            # of ours: the connector's jar lists no SourceConnector, Apicurio's jar no Converter.
            "plugin.discovery=only_scan\n"
            f"listeners=http://127.0.0.1:{self.rest_port}\n"
        )
        command = [
            "java",
            f"-Xmx{self.heap}",
            _FLOGGER,
            "-cp",
            f"{self.lib}/*",
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(worker),
        ]
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise StackError(f"Kafka Connect exited with {self.process.returncode}; see {self.log_path}")
            try:
                self._request("GET", "/connectors")
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        self.stop()
        raise StackError(
            f"Kafka Connect's REST API not up on port {self.rest_port} in {timeout_s} s; see {self.log_path}"
        )

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.rest_port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def add(self, name: str, config: dict[str, str]) -> None:
        """Create (or reconfigure) a connector; its config check runs here (an error names it)."""
        try:
            self._request("PUT", f"/connectors/{name}/config", {"connector.class": CONNECTOR_CLASS, **config})
        except urllib.error.HTTPError as exc:
            raise StackError(f"Kafka Connect refused connector {name}: {exc.read().decode(errors='replace')}") from exc

    def status(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/connectors/{name}/status")
        return result

    def remove(self, name: str) -> None:
        self._request("DELETE", f"/connectors/{name}")

    def stop(self, timeout_s: float = 30.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
