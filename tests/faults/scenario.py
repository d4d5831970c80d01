"""What every scenario does around its fault: start both workers (`WA`, `WB`) on their proxied
links, and end with the exactly-once check: every change once, per key in order, read_committed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge_devstack.sim import Emulator
from tests.faults.lab import WORKERS, FaultLab
from tests.integration.worker.chaos import Workload
from tests.integration.worker.harness import WorkerProcess, free_port, http_get, wait_for


@dataclass
class RunningWorker:
    process: WorkerProcess
    port: int  # its metrics and probes

    def readiness(self) -> tuple[int, str]:
        return http_get(self.port, "/readyz")

    def alive(self) -> bool:
        return self.process.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.process.log_path.read_text(errors="replace").splitlines()[-lines:])


def begin(start: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str, rounds: int = 4,
          per_round: int = 1000, **settings: Any) -> tuple[Workload, dict[str, RunningWorker]]:
    """The workload's table in `keyspace`, and both workers (named after the keyspace) reading it."""
    workload = Workload([(keyspace, "t")], rounds=rounds, per_round=per_round)
    workload.create(emulator)
    return workload, start_both(start, keyspace, [f"{keyspace}.t"], **settings)


def start_both(start: Callable[..., WorkerProcess], name: str, tables: list[str],
               each: Callable[[str], dict[str, object]] = lambda _: {}, **settings: object) -> dict[str, RunningWorker]:
    """Both workers with `settings`, and `each(worker)`'s own (its registry URL, say)."""
    running = {}
    for worker in WORKERS:
        port = free_port()
        process = start(worker, name, tables, metrics__port=port, **settings, **each(worker))
        running[worker] = RunningWorker(process, port)
    wait_until_ready(running, 120)
    return running


def wait_until_ready(running: dict[str, RunningWorker], timeout_s: float) -> None:
    def ready() -> bool:
        for worker, process in running.items():
            assert process.alive(), f"worker {worker} exited:\n{process.log_tail()}"
        return all(process.readiness()[0] == 200 for process in running.values())

    wait_for(ready, timeout_s, "both workers to be ready")


def check_exactly_once(lab: FaultLab, workload: Workload, name: str, running: dict[str, RunningWorker]) -> None:
    for keyspace, table in workload.tables:
        messages = lab.read(f"{name}.{keyspace}.{table}", workload.expected_events())
        try:
            workload.check((keyspace, table), messages)
        except AssertionError as error:  # with what the workers and the brokers were doing
            workers = "\n".join(f"worker {worker}: /readyz {process.readiness()}; log ends:\n{process.log_tail(8)}"
                                 for worker, process in running.items())
            raise AssertionError(f"{error}\n{workers}\n{lab.cluster.describe()}") from None
    for worker, process in running.items():
        assert process.alive(), f"worker {worker} exited instead of riding out the fault:\n{process.log_tail()}"
