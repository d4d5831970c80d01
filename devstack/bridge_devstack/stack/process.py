"""Starting, probing and stopping the stack's JVM processes. Processes are tracked by pid files
and only ever signalled by the pid this stack recorded, never by name."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


class StackError(RuntimeError):
    """A situation the user must fix; its message is one clear line (plus a log tail if any)."""


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex((host, port)) == 0


def wait_ports_free(host: str, ports: Sequence[int], timeout_s: float) -> int | None:
    """Until nothing accepts on `ports` (a process that just stopped may hold its listeners for a
    moment); returns a port still taken after `timeout_s`, or None. A server started while its old
    self still listens fails to bind, and a readiness probe answered by the old one misses that."""
    deadline = time.monotonic() + timeout_s
    while True:
        busy = next((port for port in ports if port_open(host, port)), None)
        if busy is None or time.monotonic() > deadline:
            return busy
        time.sleep(0.5)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def pid_alive(pid: int, marker: str) -> bool:
    """True if `pid` runs and its command line contains `marker` (guards against pid reuse)."""
    # A child of this very process that exited stays a zombie until reaped.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if _is_zombie(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return marker in cmdline


class PidFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> int | None:
        try:
            return int(self.path.read_text().strip())
        except (OSError, ValueError):
            return None

    def write(self, pid: int) -> None:
        self.path.write_text(f"{pid}\n")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def spawn(command: Sequence[str], cwd: Path, log_path: Path, env: dict[str, str] | None = None) -> int:
    """Start a detached process (own session, so it outlives the CLI) logging to `log_path`."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    return process.pid


def terminate(pid: int, marker: str, grace_s: float) -> None:
    """SIGTERM, then SIGKILL after `grace_s`; returns once the process is gone."""
    if not pid_alive(pid, marker):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not pid_alive(pid, marker):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while pid_alive(pid, marker):
        time.sleep(0.1)


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:])


def run_checked(command: Sequence[str], what: str, retry_hint: str, cwd: Path | None = None) -> str:
    """Run a short tool command; on failure raise one StackError naming what failed and how to retry."""
    result = subprocess.run(list(command), cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()
        detail = "\n".join(line for line in output if "ERROR" in line)[:2000] or "\n".join(output[-10:])
        raise StackError(f"{what} failed (exit {result.returncode}); retry with: {retry_hint}\n{detail}")
    return result.stdout
