"""`cdc-bridge pause|resume|stop|restart --config F`: steer the connector's workers through the
control topic (`config.storage.topic`), the same records the REST API writes, so REST is never
the only way. Each verb writes one record and returns; every worker applies it within a second
or two (`cdc-bridge status` shows what each has applied)."""

from __future__ import annotations

import argparse
import getpass
import socket
import time
from typing import Any

from confluent_kafka.admin import AdminClient

from bridge.cli.arguments import add_config_arguments
from bridge.cli.ops import TIMEOUT_S, kafka_command
from bridge.control.control_records import RestartRequest, TargetState
from bridge.control.control_topic import ControlTopic
from bridge.kafka.client_log import with_logger
from bridge.kafka.topics import control_topic, ensure_topics
from bridge.settings import BridgeConfig

_VERBS = {
    "pause": (TargetState.PAUSED, "stop reading and producing; slots kept, positions committed (resume continues)"),
    "resume": (TargetState.STARTED, "read again from the committed positions (after pause or stop)"),
    "stop": (TargetState.STOPPED, "pause and leave the slot group, so the offsets may be edited (resume restarts)"),
}


def register(commands: Any) -> None:
    for verb, (_, text) in _VERBS.items():
        parser = commands.add_parser(verb, help=text, description=text)
        add_config_arguments(parser)
        parser.set_defaults(handler=kafka_command(_target))
    restart = commands.add_parser("restart", help="retry failed groups now instead of after their backoff",
                                  description="Retry the failed groups of every task (slot), or of one "
                                              "with --task, now instead of after their backoff.")
    add_config_arguments(restart)
    restart.add_argument("--task", type=int, metavar="N", help="only task N (slot N, 0..slots.count-1)")
    restart.add_argument("--failed", action="store_true",
                         help="only failed tasks (Connect's onlyFailed; running groups are never restarted)")
    restart.set_defaults(handler=kafka_command(_restart, _restart_problem))


def _requested_by() -> str:
    return f"cli:{getpass.getuser()}@{socket.gethostname()}"


def _topic(config: BridgeConfig) -> ControlTopic:
    client = config.kafka_client_config()
    ensure_topics(AdminClient(with_logger(client)), [control_topic(config.config_topic)], TIMEOUT_S)
    return ControlTopic(config, client)


def _target(args: argparse.Namespace, config: BridgeConfig) -> int:
    state = _VERBS[args.command][0]
    _topic(config).set_target_state(state, _requested_by())
    print(f"{config.name}: target state {state} written to {config.config_topic}; "
          f"`cdc-bridge status` shows what each worker has applied")
    return 0


def _restart_problem(args: argparse.Namespace, config: BridgeConfig) -> str | None:
    if args.task is not None and not 0 <= args.task < config.slots_count:
        return f"--task: {args.task} is not a task of {config.name}: its tasks are 0..{config.slots_count - 1} " \
               f"(slots.count={config.slots_count})"
    return None


def _restart(args: argparse.Namespace, config: BridgeConfig) -> int:
    request = RestartRequest(args.task, include_tasks=True, only_failed=args.failed,
                             requested_by=_requested_by(), at_ms=int(time.time() * 1000))
    _topic(config).request_restart(request)
    which = "every task" if args.task is None else f"task {args.task}"
    print(f"{config.name}: restart of {which} written to {config.config_topic}; its failed groups are retried now")
    return 0
