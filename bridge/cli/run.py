"""`cdc-bridge run`: one worker process, until SIGTERM/SIGINT (exit 0 after a graceful stop).
The process itself is `bridge/worker/process.py`; this prints its start-up errors as one line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bridge.cli.arguments import add_config_arguments, config_from_args
from bridge.observability import configure_logging
from bridge.observability.logs import mask_text
from bridge.observability.progress import ProgressLine


def register(commands: Any) -> None:
    run = commands.add_parser("run", help="run one worker (any number may run, on any hosts)",
                              description="Read the configured CDC tables and produce Debezium envelopes to "
                                          "Kafka exactly once; workers sharing `name` share the work.")
    add_config_arguments(run)
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    progress = ProgressLine()
    configure_logging(before_line=progress.clear)
    config = config_from_args(args)
    if config is None:
        return 2
    from bridge.worker.process import StartupError, run_worker

    try:
        return run_worker(config, progress)
    except StartupError as error:
        # Masked like log lines: a client library's message could echo a configured secret.
        print(mask_text(f"error: {error.key}: {error.reason}"), file=sys.stderr)
        return 2
