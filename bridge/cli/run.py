"""`cdc-bridge run`: one worker process, until SIGTERM/SIGINT (exit 0 after a graceful stop).
The process itself is `bridge/worker/process.py`; this prints its start-up errors as one line.
With `worker.processes` above 1 it is a supervisor of that many worker processes
(`bridge/worker/supervisor.py`), each started as this command with the hidden `--worker-process`
options."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bridge.cli.arguments import add_config_arguments, config_from_args
from bridge.observability import configure_logging
from bridge.observability.logs import mask_text
from bridge.observability.progress import ProgressLine
from bridge.settings import BridgeConfig


def register(commands: Any) -> None:
    run = commands.add_parser("run", help="run one worker (any number may run, on any hosts)",
                              description="Read the configured CDC tables and produce Debezium envelopes to "
                                          "Kafka exactly once; workers sharing `name` share the work.")
    add_config_arguments(run)
    # A supervisor's child (worker.processes > 1): its index, the supervisor's pid (it dies with
    # it), and the pipe it reports its metrics port or start-up error on. Not for users.
    run.add_argument("--worker-process", type=int, default=None, help=argparse.SUPPRESS)
    run.add_argument("--supervisor-pid", type=int, default=None, help=argparse.SUPPRESS)
    run.add_argument("--report-fd", type=int, default=None, help=argparse.SUPPRESS)
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    if args.worker_process is not None:
        return _run_child(args)
    progress = ProgressLine()
    configure_logging(before_line=progress.clear)
    config = config_from_args(args)
    if config is None:
        return 2
    from bridge.worker.cpus import process_count

    count = process_count(config.worker_processes)
    if count > 1:
        return _supervise(args, config, count)
    from bridge.worker.process import StartupError, run_worker

    try:
        return run_worker(config, progress)
    except StartupError as error:
        # Masked like log lines: a client library's message could echo a configured secret.
        print(mask_text(f"error: {error.key}: {error.reason}"), file=sys.stderr)
        return 2


def _supervise(args: argparse.Namespace, config: BridgeConfig, count: int) -> int:
    from bridge.worker.supervisor import StartupFailed, supervise

    # The children read the same file, environment and --set pairs (the supervisor adds its own
    # --set pairs after them, which win).
    command = [sys.executable, "-m", "bridge.cli", "run", "--config", str(args.config),
               *(arg for pair in args.set for arg in ("--set", pair))]
    try:
        return supervise(config, command, count)
    except StartupFailed as error:
        print(mask_text(error.line), file=sys.stderr)
        return 2


def _run_child(args: argparse.Namespace) -> int:
    from bridge.worker.supervisor import ChildReport, become_child

    become_child(args.worker_process, args.supervisor_pid)
    progress = ProgressLine()
    progress.enabled = False  # N children drawing one terminal line would garble it
    configure_logging(before_line=progress.clear)
    report = ChildReport(args.report_fd)
    config = config_from_args(args)
    if config is None:
        report.failed("error: --config: the worker process could not read the settings the supervisor read")
        return 2
    from bridge.worker.process import StartupError, run_worker

    try:
        return run_worker(config, progress, on_serving=report.serving)
    except StartupError as error:
        # To the supervisor, which prints the first child's once, not N times.
        report.failed(mask_text(f"error: {error.key}: {error.reason}"))
        return 2
