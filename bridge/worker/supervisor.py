"""`worker.processes=N` (N > 1): one `cdc-bridge run` that runs N worker processes.

Why processes: a worker's CPU is bound by one interpreter lock, so one `cdc-bridge run` can use
one core. Each child here is a whole, ordinary worker (`cdc-bridge run` with `worker.processes=1`,
through `run_worker`): it joins the slot consumer group like a worker on another host, with the
same `name`, so slots, transactions and fencing are exactly those of N separate workers
(docs/worker.md). With `worker.instance.id=X`, child i is the static member `X-i` (and its
transactional id `<name>-X-i`), so a restarted child gets its own slots back and fences its own
previous incarnation.

Why `subprocess` running `python -m bridge.cli run` rather than `multiprocessing`: a child is then
exactly the process a user would start (same start-up, same signal handling, its own fresh
interpreter with nothing inherited but the file descriptor it reports on), its pid and exit code
are plain, and nothing of the supervisor's state (threads, the HTTP server) has to survive a
fork or be pickled for a spawn.

The supervisor:
- serves `metrics.port`: `/metrics` is every child's metrics merged (label `worker_process`),
  `/healthz` and `/readyz` ask every child's own (bridge/observability/merged_metrics.py);
- restarts a child that dies, after a backoff (1 s, doubled while it keeps dying young, 30 s at
  most), one log line each;
- on SIGTERM/SIGINT forwards SIGTERM to every child and waits for them (the children's own bound,
  `shutdown.timeout.ms`, plus a margin; then SIGKILL);
- stops everything and exits 2 with the child's one error line when a child cannot start (a
  setting, Kafka or Cassandra out of reach): restarting it would only repeat the error.

Children die with the supervisor even when it is SIGKILLed: each asks the kernel for SIGKILL when
its parent dies (`prctl(PR_SET_PDEATHSIG)`, `become_child`). That signal follows the *thread*
that forked the child, so children are only ever started from the supervisor's main thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from bridge.observability.http import ProbeServer, serve_http
from bridge.observability.logs import bind_process_fields
from bridge.observability.merged_metrics import MergedCollector
from bridge.settings import BridgeConfig

log = structlog.get_logger(__name__)

CHILD_HOST = "127.0.0.1"  # children serve their metrics on loopback only: the supervisor's port is the public one
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
HEALTHY_RUN_S = 60.0  # a child that ran this long before dying starts again from the first backoff
STOP_MARGIN_S = 5.0  # beyond the children's own bound (they exit 3 at shutdown.timeout.ms)
CHILD_HTTP_TIMEOUT_S = 3.0  # below the probes' own timeouts, so a hung child fails the probe, not the scrape
STARTUP_EXIT = 2  # a worker's exit code when it cannot start (bridge/cli/run.py)
_PR_SET_PDEATHSIG = 1


class StartupFailed(Exception):
    """The supervisor cannot start, or a child could not: `line` is the one error line to print."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


# ---------------------------------------------------------------------------- the child's side


def become_child(index: int, supervisor_pid: int) -> None:
    """In a child, first thing: die with the supervisor, and carry `worker_process=i` on every log line."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the children outlive a SIGKILLed supervisor
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != supervisor_pid:  # it died before the prctl: nobody would stop this process
        os._exit(1)
    bind_process_fields(worker_process=index)


class ChildReport:
    """The child's end of its report pipe: one JSON line when its metrics port is bound, or the
    start-up error line (printed once by the supervisor instead of once per child)."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", buffering=1)

    def serving(self, port: int | None) -> None:
        self._send({"port": port})

    def failed(self, line: str) -> None:
        self._send({"error": line})

    def _send(self, message: Mapping[str, object]) -> None:
        with contextlib.suppress(OSError):  # the supervisor is gone: this process dies with it anyway
            self._file.write(json.dumps(message) + "\n")
            self._file.flush()


# ---------------------------------------------------------------------------- the supervisor's side


@dataclass
class _Child:
    index: int
    process: subprocess.Popen[bytes] | None = None
    port: int | None = None
    error: str | None = None
    started_at: float = 0.0
    next_start: float = 0.0
    backoff_s: float = FIRST_BACKOFF_S
    reader: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Supervisor:
    def __init__(self, config: BridgeConfig, command: Sequence[str], count: int) -> None:
        """`command`: the children's `cdc-bridge run` with the user's `--config` and `--set`s."""
        self._config = config
        self._command = list(command)
        self._children = [_Child(i) for i in range(count)]
        self._stop = threading.Event()
        self.registry = CollectorRegistry()
        self._running = Gauge("cdc_bridge_worker_processes", "Worker processes of this cdc-bridge run alive now "
                              "(worker.processes).", registry=self.registry)
        self._restarts = Counter("cdc_bridge_worker_process_restarts", "Worker processes restarted after they "
                                 "died, by index.", ["worker_process"], registry=self.registry)
        for child in self._children:
            self._restarts.labels(str(child.index))
        self.registry.register(MergedCollector(self._metrics_texts))
        self._pool = ThreadPoolExecutor(max_workers=min(16, count), thread_name_prefix="child-http")

    # ------------------------------------------------------------------ running

    def run(self) -> int:
        server = self._serve()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self._stop.set())
        try:
            for child in self._children:
                self._start(child)
            log.info("worker processes running", processes=len(self._children), pid=os.getpid(),
                     metrics_port=server.port if server is not None else None)
            while not self._stop.wait(0.2):
                self._watch()
            return self._stop_children()
        except StartupFailed:
            self._stop_children()
            raise
        finally:
            if server is not None:
                server.close()
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _serve(self) -> ProbeServer | None:
        config = self._config
        if not config.metrics_port:
            return None
        try:
            return serve_http(config.metrics_port, self, self, config.metrics_bind_address)
        except OSError as error:
            raise StartupFailed(f"error: metrics.port: {config.metrics_bind_address}:{config.metrics_port}: "
                                f"{error.strerror or error}") from None

    def _start(self, child: _Child) -> None:
        read_fd, write_fd = os.pipe()
        overrides = ["worker.processes=1", "metrics.port=0", f"metrics.bind.address={CHILD_HOST}"]
        if self._config.worker_instance_id:
            overrides.append(f"worker.instance.id={self._config.worker_instance_id}-{child.index}")
        if child.index > 0:  # the REST API is served once per pod, by child 0 (any worker answers for all)
            overrides.append("listeners=")
        command = [*self._command, *(arg for pair in overrides for arg in ("--set", pair)),
                   "--worker-process", str(child.index), "--supervisor-pid", str(os.getpid()),
                   "--report-fd", str(write_fd)]
        try:
            # Own process group: a terminal's Ctrl-C reaches the supervisor only, which decides
            # what the children get (a SIGTERM, once, and no restart).
            process = subprocess.Popen(command, pass_fds=(write_fd,), process_group=0)  # noqa: S603 (our own CLI)
        finally:
            os.close(write_fd)
        with child.lock:
            child.process, child.port, child.error = process, None, None
        child.started_at = time.monotonic()
        child.reader = threading.Thread(target=self._read_reports, args=(child, read_fd),
                                        name=f"child-{child.index}-reports", daemon=True)
        child.reader.start()
        self._running.set(sum(c.alive() for c in self._children))
        log.info("worker process started", worker_process=child.index, child_pid=process.pid)

    def _read_reports(self, child: _Child, fd: int) -> None:
        with os.fdopen(fd, "r") as reports:
            for line in reports:  # ends when the child exits (its end is the only writer)
                with contextlib.suppress(ValueError):
                    message = json.loads(line)
                    with child.lock:
                        if "port" in message:
                            child.port = message["port"]
                        if "error" in message:
                            child.error = str(message["error"])

    def _watch(self) -> None:
        now = time.monotonic()
        for child in self._children:
            process = child.process
            if process is None:
                if now >= child.next_start and not self._stop.is_set():
                    self._start(child)
                continue
            code = process.poll()
            if code is None:
                continue
            if child.reader is not None:
                child.reader.join(1.0)  # the child's last report (its error line) is read
            self._running.set(sum(c.alive() for c in self._children))
            if code == STARTUP_EXIT or child.error is not None:
                log.error("worker process could not start; stopping every worker process",
                          worker_process=child.index, child_pid=process.pid, exit_code=code)
                raise StartupFailed(child.error or f"error: worker.processes: worker process {child.index} "
                                                   f"exited {code} at start-up")
            ran_s = now - child.started_at
            if ran_s >= HEALTHY_RUN_S:
                child.backoff_s = FIRST_BACKOFF_S
            log.warning("worker process exited; restarting", worker_process=child.index, child_pid=process.pid,
                        exit_code=code, ran_s=round(ran_s, 1), restart_in_s=child.backoff_s)
            self._restarts.labels(str(child.index)).inc()
            with child.lock:
                child.process, child.port = None, None
            child.next_start = now + child.backoff_s
            child.backoff_s = min(MAX_BACKOFF_S, child.backoff_s * 2)

    def _stop_children(self) -> int:
        """SIGTERM to every child, then wait within their bound; 0 when every one stopped cleanly."""
        alive = [c.process for c in self._children if c.process is not None and c.process.poll() is None]
        log.info("stopping worker processes", processes=len(alive))
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self._config.shutdown_timeout_ms / 1000 + STOP_MARGIN_S
        worst = 0
        for process in alive:
            try:
                code = process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker process overran its graceful stop; killing it", child_pid=process.pid)
                process.kill()
                code = 3  # as a worker whose own stop overran (bridge/worker/process.py)
                process.wait()
            worst = max(worst, code) if code >= 0 else max(worst, 3)
        self._running.set(0)
        return worst

    # ------------------------------------------------------------------ probes and metrics

    def _fetch(self, port: int | None, path: str) -> tuple[int, str]:
        """(status, body) of a child's endpoint; (0, reason) when it does not answer."""
        if port is None:
            return 0, "starting: metrics port not known yet"
        try:
            with urllib.request.urlopen(f"http://{CHILD_HOST}:{port}{path}",
                                        timeout=CHILD_HTTP_TIMEOUT_S) as answer:
                return int(answer.status), answer.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode(errors="replace")
        except OSError as error:
            return 0, f"does not answer: {error}"

    def _answers(self, path: str) -> dict[int, tuple[int, str]]:
        """Every child's answer to `path`, asked at once (a dead or restarting child: status 0)."""
        ports: dict[int, int | None] = {}
        for child in self._children:
            with child.lock:
                ports[child.index] = child.port if child.alive() else None
        futures = {index: self._pool.submit(self._fetch, port, path) for index, port in ports.items()}
        answers: dict[int, tuple[int, str]] = {}
        for index, future in futures.items():
            try:
                answers[index] = future.result()
            except RuntimeError:  # the pool is shut down: the supervisor is stopping
                answers[index] = (0, "stopping")
        for index, port in ports.items():
            if port is None and not self._children[index].alive():
                answers[index] = (0, "not running (restarting)")
        return answers

    def _metrics_texts(self) -> dict[str, str]:
        """Each answering child's /metrics text, by its index."""
        return {str(i): body for i, (status, body) in self._answers("/metrics").items() if status == 200}

    def liveness(self) -> tuple[bool, str]:
        return _combined(self._answers("/healthz"), "alive")

    def readiness(self) -> tuple[bool, str]:
        return _combined(self._answers("/readyz"), "ready")


def _combined(answers: Mapping[int, tuple[int, str]], what: str) -> tuple[bool, str]:
    """One probe answer from every child's: ok when each is 200; the reason has one line per child."""
    failing = sum(status != 200 for status, _ in answers.values())
    head = f"all {len(answers)} worker processes {what}" if not failing else \
        f"{failing} of {len(answers)} worker processes not {what}"
    lines = [f"{index}: {body.strip() or status}" for index, (status, body) in sorted(answers.items())]
    return failing == 0, "\n".join([head, *lines])


def supervise(config: BridgeConfig, command: Sequence[str], count: int) -> int:
    """Run `count` worker processes until SIGTERM/SIGINT; the exit code. Raises `StartupFailed`."""
    return Supervisor(config, command, count).run()
