"""`up`, `status` and `down` for the whole local stack."""

from __future__ import annotations

import contextlib
import fcntl
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.process import (
    PidFile,
    StackError,
    log_tail,
    pid_alive,
    port_open,
    spawn,
    terminate,
)
from bridge_devstack.stack.secure import SecureMaterial
from bridge_devstack.stack.services import Service, all_services
from bridge_devstack.stack.spark_cluster import spark_cluster_services

READY_TIMEOUT_S = 240.0


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    name: str
    state: str  # ready | starting | down | foreign
    pid: int | None
    endpoint: str
    detail: str = ""


def check_java() -> None:
    if shutil.which("java") is None:
        raise StackError("Java is not on PATH; the stack needs Java 17 or newer (apt-get install openjdk-17-jre)")
    banner = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', banner)
    if match is None or int(match.group(1)) < 17:
        raise StackError(f"the stack needs Java 17 or newer, found: {banner.splitlines()[0] if banner else '?'}")


class StackManager:
    """`secure`: True for the secured variant (made once per state folder, which then stays
    secured), None to take whatever the state folder was set up as. `spark_cluster`: also the
    Spark standalone master and workers (devstack/bridge_devstack/stack/spark_cluster.py); without it they are
    still shown and stopped while one of them runs."""

    def __init__(self, layout: StackLayout, endpoints: Endpoints, say: Callable[[str], None] = print,
                 secure: bool | None = None, spark_cluster: bool = False) -> None:
        self.layout = layout
        self.endpoints = endpoints
        self.say = say
        self.secure = _secure_material(layout, endpoints, secure)
        self.services = all_services(layout, endpoints, self.secure)
        spark = spark_cluster_services(layout, endpoints)
        # A cluster whose processes are gone (pid files left by a crash) is not shown as down:
        # `scripts/test` would start what `stack status` lists as not ready.
        if spark_cluster or any(self.pid_of(s) is not None for s in spark):
            self.services += spark

    @classmethod
    def default(cls, secure: bool | None = None, spark_cluster: bool = False) -> StackManager:
        return cls(StackLayout.default(), Endpoints.from_env(), secure=secure, spark_cluster=spark_cluster)

    def service(self, name: str) -> Service:
        for service in self.services:
            if service.name == name:
                return service
        raise KeyError(name)

    def _selected(self, only: Iterable[str] | None) -> list[Service]:
        names = set(only) if only is not None else None
        return [s for s in self.services if names is None or s.name in names]

    def pid_of(self, service: Service) -> int | None:
        pid = PidFile(service.pid_path).read()
        return pid if pid is not None and pid_alive(pid, service.main_marker) else None

    def status_of(self, service: Service) -> ServiceStatus:
        recorded = PidFile(service.pid_path).read()
        pid = self.pid_of(service)
        if pid is not None:
            state = "ready" if service.ready() else "starting"
            return ServiceStatus(service.name, state, pid, service.endpoint)
        busy = [p for p in service.ports if port_open(self.endpoints.host, p)]
        if busy:
            return ServiceStatus(service.name, "foreign", None, service.endpoint,
                                 f"port {busy[0]} is in use by a process this stack did not start")
        detail = f"process {recorded} from the pid file is gone" if recorded is not None else ""
        return ServiceStatus(service.name, "down", None, service.endpoint, detail)

    def status(self) -> list[ServiceStatus]:
        return [self.status_of(s) for s in self.services]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One `up`/`down` at a time per state folder: two concurrent `up`s would otherwise both
        find a service down and start it twice."""
        self.layout.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.layout.state_dir / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def up(self, quiet: bool = False, only: Iterable[str] | None = None) -> list[str]:
        """Start what is not running and wait until every service accepts clients.
        Returns the names of the services this call started."""
        with self._locked():
            return self._up(quiet, self._selected(only))

    def _up(self, quiet: bool, services: list[Service]) -> list[str]:
        began = time.monotonic()
        to_start: list[Service] = []
        for service in services:
            current = self.status_of(service)
            if current.state == "foreign":
                raise StackError(f"{service.name}: {current.detail}; stop it or free the port, then run again")
            if current.state == "down":
                to_start.append(service)
        if to_start:
            check_java()
        for service in to_start:
            self._fresh_log(service)
            if service.fetch():
                self.say(f"{service.name}: fetched from Maven Central into {service.home / 'lib'}")
            service.prepare()
        for service in to_start:
            pid = spawn(service.command(), cwd=service.home, log_path=service.log_path, env=service.environment())
            PidFile(service.pid_path).write(pid)
            self.say(f"{service.name}: started (pid {pid}), log {service.log_path}")
        self._wait_ready(services)
        if not quiet or to_start:
            self.say(f"stack ready in {time.monotonic() - began:.1f}s: " + ", ".join(
                f"{s.name} {s.endpoint}" for s in services))
        return [s.name for s in to_start]

    def _fresh_log(self, service: Service) -> None:
        service.home.mkdir(parents=True, exist_ok=True)
        # A new start gets a new log, so a failure report shows only this attempt.
        if service.log_path.exists():
            service.log_path.replace(service.log_path.with_suffix(".log.1"))

    def _wait_ready(self, services: list[Service]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = list(services)
        while pending:
            for service in list(pending):
                if self._gone(service):
                    PidFile(service.pid_path).remove()
                    raise StackError(f"{service.name} died during start; last lines of {service.log_path}:\n"
                                     + log_tail(service.log_path))
                if service.ready():
                    pending.remove(service)
            if pending and time.monotonic() > deadline:
                names = ", ".join(s.name for s in pending)
                raise StackError(f"{names} not ready after {READY_TIMEOUT_S:.0f}s; see the logs under "
                                 f"{self.layout.state_dir}")
            if pending:
                time.sleep(0.5)

    def _gone(self, service: Service) -> bool:
        """Dead for sure: one look can miss a live JVM (its launcher may exec itself again, and a
        busy machine stretches that moment), and a live broker judged dead is left running with
        its pid file removed, holding its ports."""
        for _ in range(5):
            if self.pid_of(service) is not None:
                return False
            time.sleep(0.2)
        return True

    def down(self, only: Iterable[str] | None = None) -> list[str]:
        """Stop the processes this stack started (by their recorded pids). Returns their names."""
        stopped = []
        with self._locked():
            for service in self._selected(only):
                if self._stop(service):
                    stopped.append(service.name)
        return stopped

    def _stop(self, service: Service) -> bool:
        pid = self.pid_of(service)
        if pid is not None:
            terminate(pid, service.main_marker, service.stop_grace_s)
            self.say(f"{service.name}: stopped (pid {pid})")
        PidFile(service.pid_path).remove()
        return pid is not None


def _secure_material(layout: StackLayout, endpoints: Endpoints, secure: bool | None) -> SecureMaterial | None:
    folder = layout.state_dir / "secure"
    if SecureMaterial.exists_in(folder):
        if secure is False:
            raise StackError(f"the stack in {layout.state_dir} was set up with --secure; use another "
                             "CDC_BRIDGE_STACK_DIR for a plain one")
        return SecureMaterial.ensure(folder, endpoints)
    if not secure:
        return None
    # Kafka's SCRAM users are written when its storage is formatted, and Cassandra's roles when it
    # first starts: a folder that already ran plain cannot turn secure in place.
    used = [name for name in ("kafka", "cassandra") if (layout.home(name) / "data").exists()]
    if used:
        raise StackError(f"the stack in {layout.state_dir} was set up without --secure ({used[0]} has data); "
                         "use another CDC_BRIDGE_STACK_DIR (and CDC_BRIDGE_STACK_PORT_OFFSET) for a secured one")
    return SecureMaterial.ensure(folder, endpoints)
