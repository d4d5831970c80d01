"""The three services of the local stack: how each is fetched, configured, started and probed."""

from __future__ import annotations

import hashlib
import logging
import shutil
import tarfile
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from pathlib import Path
from string import Template

from bridge_devstack.stack.kafka_cluster import new_cluster_id
from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.process import StackError, port_open, run_checked
from bridge_devstack.stack.secure import SecureMaterial


def _fetch_once(recipe: Path, dest: Path, command: list[str], what: str) -> bool:
    """Run a Maven fetch into `dest` unless it already holds the result for this exact recipe
    (Maven itself caches downloads in ~/.m2). Returns True if it fetched."""
    digest = hashlib.sha256(recipe.read_bytes()).hexdigest()
    stamp = dest / ".fetched-from"
    if stamp.exists() and stamp.read_text() == digest:
        return False
    if shutil.which("mvn") is None:
        raise StackError("Maven (mvn) is not on PATH; install it (apt-get install maven) and run again")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    run_checked(command, f"downloading {what} from Maven Central", " ".join(command), cwd=dest)
    stamp.write_text(digest)
    return True


def maven_fetch_dependencies(pom: Path, dest: Path) -> bool:
    """The POM's runtime classpath, as jars in `dest`."""
    command = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={dest}"]
    return _fetch_once(pom, dest, command, pom.parent.name)


def maven_fetch_artifact(artifact_file: Path, dest: Path) -> bool:
    """One artifact named by the first non-comment line of `artifact_file`, without dependencies."""
    lines = [ln.strip() for ln in artifact_file.read_text().splitlines()]
    coordinates = next(ln for ln in lines if ln and not ln.startswith("#"))
    command = ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={coordinates}", f"-DoutputDirectory={dest}"]
    return _fetch_once(artifact_file, dest, command, coordinates)


def _render(template: Path, target: Path, **values: object) -> None:
    target.write_text(Template(template.read_text()).substitute({k: str(v) for k, v in values.items()}))


class Service(ABC):
    name: str
    main_marker: str  # a string in the process's command line that identifies it
    heap: str
    stop_grace_s: float = 30.0

    def __init__(self, layout: StackLayout, endpoints: Endpoints, secure: SecureMaterial | None = None) -> None:
        self.layout = layout
        self.endpoints = endpoints
        self.secure = secure  # set: the secured variant (TLS and authentication)
        self.recipe = layout.recipe(self.name)
        self.home = layout.home(self.name)

    @property
    def log_path(self) -> Path:
        return self.home / f"{self.name}.log"

    @property
    def pid_path(self) -> Path:
        return self.home / f"{self.name}.pid"

    @property
    @abstractmethod
    def ports(self) -> tuple[int, ...]: ...

    @property
    @abstractmethod
    def endpoint(self) -> str: ...

    def fetch(self) -> bool:
        return maven_fetch_dependencies(self.recipe / "pom.xml", self.home / "lib")

    @abstractmethod
    def prepare(self) -> None:
        """Write config and initialise storage; must be idempotent."""

    @abstractmethod
    def command(self) -> list[str]: ...

    def environment(self) -> dict[str, str]:
        """Environment variables the process gets beside ours."""
        return {}

    @abstractmethod
    def ready(self) -> bool:
        """True once the service accepts real client requests."""


class Kafka(Service):
    name = "kafka"
    main_marker = "kafka.Kafka"
    # Every test and benchmark run leaves topics behind: a day's 16,600 partitions ran a 512m
    # broker out of heap (and slowed its transaction commits to seconds before that).
    heap = "1g"

    @property
    def ports(self) -> tuple[int, ...]:
        tls = (self.endpoints.kafka_tls_port,) if self.secure else ()
        return (self.endpoints.kafka_port, self.endpoints.kafka_controller_port, *tls)

    @property
    def endpoint(self) -> str:
        if self.secure is not None:
            tls = f"{self.endpoints.host}:{self.endpoints.kafka_tls_port}"
            return f"{self.endpoints.kafka_bootstrap} (SASL_SSL), {tls} (SSL)"
        return self.endpoints.kafka_bootstrap

    @property
    def _config(self) -> Path:
        return self.home / "server.properties"

    def prepare(self) -> None:
        data = self.home / "data"
        _render(self.recipe / "server.properties.in", self._config, port=self.endpoints.kafka_port,
                controller_port=self.endpoints.kafka_controller_port, data_dir=data)
        if self.secure is not None:
            self._config.chmod(0o600)  # it holds the keystore password
            with self._config.open("a") as config:
                config.write(self.secure.kafka_properties(self.endpoints))
        if (data / "meta.properties").exists():
            return
        cluster_id = new_cluster_id()
        command = ["java", "-Xmx256m", "-cp", f"{self.home / 'lib'}/*", "kafka.tools.StorageTool",
                   "format", "--standalone", "-t", cluster_id, "-c", str(self._config)]
        users = self.secure.kafka_format_arguments() if self.secure is not None else []
        run_checked(command + users, "formatting Kafka's KRaft storage", " ".join(command))

    def command(self) -> list[str]:
        return ["java", f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={self.recipe / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.home}", "-cp", f"{self.home / 'lib'}/*",
                self.main_marker, str(self._config)]

    def ready(self) -> bool:
        if not port_open(self.endpoints.host, self.endpoints.kafka_port):
            return False
        from confluent_kafka.admin import AdminClient

        client = (self.secure.kafka_client(self.endpoints) if self.secure is not None
                  else {"bootstrap.servers": self.endpoint})
        admin = AdminClient({**client, "log_level": 0})
        try:
            return bool(admin.list_topics(timeout=3).brokers)
        except Exception:  # any client error simply means "not ready yet"
            return False


class Cassandra(Service):
    name = "cassandra"
    main_marker = "org.apache.cassandra.service.CassandraDaemon"
    heap = "1g"
    stop_grace_s = 45.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.endpoints.cassandra_port, self.endpoints.cassandra_storage_port)

    @property
    def endpoint(self) -> str:
        address = f"{self.endpoints.cassandra_host}:{self.endpoints.cassandra_port}"
        return f"{address} (TLS, password)" if self.secure is not None else address

    def prepare(self) -> None:
        data = self.home / "data"
        data.mkdir(parents=True, exist_ok=True)
        security = (self.secure.cassandra_settings() if self.secure is not None
                    else {"authenticator": "AllowAllAuthenticator", "client_encryption": ""})
        _render(self.recipe / "cassandra.yaml.in", self.home / "cassandra.yaml",
                port=self.endpoints.cassandra_port, storage_port=self.endpoints.cassandra_storage_port,
                data_dir=data, **security)

    def command(self) -> list[str]:
        options = [line.strip() for line in (self.recipe / "jvm17.options").read_text().splitlines()
                   if line.strip() and not line.startswith("#")]
        return ["java", f"-Xms{self.heap}", f"-Xmx{self.heap}", *options,
                f"-Dcassandra.config=file://{self.home / 'cassandra.yaml'}",
                f"-Dlogback.configurationFile={self.recipe / 'logback.xml'}",
                f"-Dcassandra.storagedir={self.home / 'data'}",
                "-Dcassandra-foreground=yes",
                # Single node: no need to wait for gossip, and create the superuser at once.
                "-Dcassandra.skip_wait_for_gossip_to_settle=0",
                "-Dcassandra.superuser_setup_delay_ms=0",
                "-cp", f"{self.home / 'lib'}/*", self.main_marker]

    def ready(self) -> bool:
        if not port_open(self.endpoints.host, self.endpoints.cassandra_port):
            return False
        from cassandra.cluster import Cluster

        logging.getLogger("cassandra").setLevel(logging.CRITICAL)
        if self.secure is not None:
            return self.secure.cassandra_ready(self.endpoints)
        cluster = Cluster([self.endpoints.cassandra_host], port=self.endpoints.cassandra_port,
                          protocol_version=5, connect_timeout=3)
        try:
            session = cluster.connect()
            return session.execute("SELECT release_version FROM system.local").one() is not None
        except Exception:  # any driver error simply means "not ready yet"
            return False
        finally:
            cluster.shutdown()


class Apicurio(Service):
    name = "apicurio"
    main_marker = "apicurio-registry-app"
    heap = "512m"

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.endpoints.registry_port,)

    @property
    def endpoint(self) -> str:
        return self.endpoints.schema_registry_url

    @property
    def _app(self) -> Path:
        return self.home / "dist"

    def _runner(self) -> Path | None:
        return next(iter(sorted(self._app.glob("apicurio-registry-app-*-runner.jar"))), None)

    def fetch(self) -> bool:
        fetched = maven_fetch_artifact(self.recipe / "artifact", self.home / "lib")
        if fetched or self._runner() is None:
            tarballs = sorted((self.home / "lib").glob("apicurio-registry-app-*.tar.gz"))
            if not tarballs:
                raise StackError(f"no Apicurio tarball in {self.home / 'lib'}; delete that folder and run again")
            shutil.rmtree(self._app, ignore_errors=True)
            with tarfile.open(tarballs[-1]) as archive:
                archive.extractall(self._app, filter="data")
            fetched = True
        return fetched

    def prepare(self) -> None:
        return None  # in-memory storage: nothing to initialise

    def command(self) -> list[str]:
        runner = self._runner()
        if runner is None:
            raise StackError(f"no Apicurio runner jar in {self._app}; delete {self.home} and run again")
        return ["java", f"-Xms{self.heap}", f"-Xmx{self.heap}",
                f"-Dquarkus.http.host={self.endpoints.host}",
                f"-Dquarkus.http.port={self.endpoints.registry_port}",
                "-jar", str(runner)]

    def ready(self) -> bool:
        if not port_open(self.endpoints.host, self.endpoints.registry_port):
            return False
        try:
            with urllib.request.urlopen(f"{self.endpoint}/subjects", timeout=3) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False


def all_services(layout: StackLayout, endpoints: Endpoints, secure: SecureMaterial | None = None) -> list[Service]:
    return [Kafka(layout, endpoints, secure), Cassandra(layout, endpoints, secure), Apicurio(layout, endpoints)]
