"""Toxiproxy (Shopify's TCP fault proxy, a Go module) for the fault tests: installed with
`go install` into the stack's state folder, started and stopped by pid like the other services,
driven through its HTTP API. A proxy sits between a client and one server address; disabling it
refuses and cuts connections (a server out of reach), toxics add latency, bandwidth limits or
stalls to the live traffic."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge_devstack.stack.process import (
    PidFile,
    StackError,
    log_tail,
    port_open,
    run_checked,
    spawn,
    terminate,
)

MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
VERSION = "v2.5.0"  # the newest the Go module proxy serves


def install(state_dir: Path) -> Path:
    """The toxiproxy server binary, built once into `state_dir/toxiproxy/bin` (Go from PATH)."""
    bin_dir = state_dir / "toxiproxy" / "bin"
    binary = bin_dir / f"toxiproxy-server-{VERSION}"
    if binary.exists():
        return binary
    if shutil.which("go") is None:
        raise StackError("Go (go) is not on PATH; it builds toxiproxy for the fault tests")
    bin_dir.mkdir(parents=True, exist_ok=True)
    build = bin_dir / "build"
    env_gobin = f"GOBIN={build}"
    run_checked(["env", env_gobin, "go", "install", f"{MODULE}@{VERSION}"], "building toxiproxy",
                f"{env_gobin} go install {MODULE}@{VERSION}", cwd=bin_dir)
    (build / "server").rename(binary)
    shutil.rmtree(build, ignore_errors=True)
    return binary


class Toxiproxy:
    """One toxiproxy server listening for its API on `api_port`."""

    def __init__(self, binary: Path, home: Path, api_port: int, host: str = "127.0.0.1") -> None:
        self.binary, self.home, self.api_port, self.host = binary, home, api_port, host
        self._pid = PidFile(home / "toxiproxy.pid")

    @property
    def _marker(self) -> str:
        return f"-port {self.api_port}"

    def start(self, timeout_s: float = 20.0) -> None:
        if port_open(self.host, self.api_port):
            raise StackError(f"port {self.api_port} for toxiproxy's API is taken (another run of the fault tests?)")
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.home / "toxiproxy.log"
        pid = spawn([str(self.binary), "-host", self.host, "-port", str(self.api_port)], self.home, log)
        self._pid.write(pid)
        deadline = time.monotonic() + timeout_s
        exit_status: int | None = None
        while time.monotonic() < deadline and exit_status is None:
            try:
                self.call("GET", "/version")
                return
            except OSError:
                exit_status = _exit_status(pid)
                time.sleep(0.2)
        if exit_status is None:  # never left running behind a failed start
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _exit_status(pid)
        self._pid.remove()
        ended = f"it exited with status {exit_status}" if exit_status is not None else f"not within {timeout_s:.0f} s"
        raise StackError(f"toxiproxy (pid {pid}) did not answer on port {self.api_port}, {ended}:\n{log_tail(log)}")

    def stop(self) -> None:
        pid = self._pid.read()
        if pid is not None:
            terminate(pid, self._marker, grace_s=5)
        self._pid.remove()

    def proxy(self, name: str, listen_port: int, upstream: str) -> Proxy:
        """A new proxy from `host:listen_port` to `upstream` (host:port), enabled."""
        self.call("POST", "/proxies", {"name": name, "listen": f"{self.host}:{listen_port}",
                                        "upstream": upstream, "enabled": True})
        return Proxy(self, name, listen_port)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://{self.host}:{self.api_port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read()
        except urllib.error.HTTPError as error:
            raise StackError(f"toxiproxy {method} {path}: {error.code} {error.read().decode()}") from None
        try:
            return json.loads(text) if text else None
        except ValueError:
            return text.decode()  # /version answers in plain text


def _exit_status(pid: int) -> int | None:
    """The exit status of our child `pid` once it ended (reaped here), else None. Asked of the
    kernel (waitpid), not of /proc: a start must not be taken for failed while its server lives."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if done else None


@dataclass(frozen=True)
class Proxy:
    server: Toxiproxy
    name: str
    listen_port: int

    @property
    def address(self) -> str:
        return f"{self.server.host}:{self.listen_port}"

    def enable(self, enabled: bool = True) -> None:
        """Disabled: new connections are refused and open ones closed; enabled again: accepted."""
        self.server.call("POST", f"/proxies/{self.name}", {"enabled": enabled})

    def disable(self) -> None:
        self.enable(False)

    def toxic(self, kind: str, stream: str = "downstream", **attributes: int) -> str:
        """Add a toxic (`latency`, `bandwidth`, `timeout`, `slow_close`, ...); returns its name."""
        name = f"{kind}_{stream}_{os.urandom(3).hex()}"
        self.server.call("POST", f"/proxies/{self.name}/toxics",
                          {"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes})
        return name

    def clear(self) -> None:
        """Remove every toxic."""
        for toxic in self.server.call("GET", f"/proxies/{self.name}/toxics") or []:
            self.server.call("DELETE", f"/proxies/{self.name}/toxics/{toxic['name']}")
