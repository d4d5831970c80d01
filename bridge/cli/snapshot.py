"""`cdc-bridge snapshot start|stop|status --config F --table ks.t`: signal an incremental snapshot
of a streaming table (Debezium's `execute-snapshot` / `stop-snapshot` signal records on
`signal.kafka.topic`), and show how far each group's snapshot has gone (its offsets)."""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from bridge.cli.arguments import add_config_arguments
from bridge.cli.ops import TIMEOUT_S, kafka_command, read_offsets
from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.signals import EXECUTE, STOP, signal_value
from bridge.kafka.topics import ensure_topics, signals_topic
from bridge.settings import BridgeConfig


def register(commands: Any) -> None:
    snapshot = commands.add_parser("snapshot", help="signal an incremental snapshot of a table, stop it, show it")
    actions = snapshot.add_subparsers(dest="snapshot_command", metavar="ACTION", required=True)
    for action, text in (("start", "snapshot the table while it streams (an execute-snapshot signal)"),
                         ("stop", "stop the table's incremental snapshot (a stop-snapshot signal)"),
                         ("status", "each group's snapshot: running (last token read) or not")):
        parser = actions.add_parser(action, help=text)
        add_config_arguments(parser)
        parser.add_argument("--table", metavar="KS.TABLE", required=True, help="a table of scylla.table.names")
        body = _status if action == "status" else _signal
        parser.set_defaults(handler=kafka_command(body, _problem))


def _problem(args: argparse.Namespace, config: BridgeConfig) -> str | None:
    if args.table not in {f"{ks}.{t}" for ks, t in config.tables()}:
        return f"--table: {args.table} is not in scylla.table.names"
    if args.snapshot_command != "status" and config.signals_topic is None:
        return "signal.enabled.channels: must include kafka for the workers to read snapshot signals"
    return None


def _signal(args: argparse.Namespace, config: BridgeConfig) -> int:
    topic = config.signals_topic
    assert topic is not None
    client = with_logger(config.kafka_client_config())
    ensure_topics(AdminClient(client), [signals_topic(topic)], TIMEOUT_S)
    kind = EXECUTE if args.snapshot_command == "start" else STOP
    value = signal_value(kind, [args.table])
    producer = Producer({**client, "enable.idempotence": True})
    producer.produce(topic, value, config.topic_prefix.encode())
    if producer.flush(TIMEOUT_S) > 0:
        raise KafkaUnavailableError(f"the {kind} signal was not acknowledged by {topic} in {TIMEOUT_S:.0f} s")
    print(f"{kind} signal for {args.table} written to {topic}: {value.decode()}")
    return 0


def _status(args: argparse.Namespace, config: BridgeConfig) -> int:
    keyspace, _, table = args.table.partition(".")
    positions = {g: p for g, p in read_offsets(config)[0].items() if (g.keyspace, g.table) == (keyspace, table)}
    running = {g: p.snapshot for g, p in positions.items() if p.snapshot is not None and not p.snapshot.completed}
    done = sum(1 for p in positions.values() if p.snapshot is not None and p.snapshot.completed)
    print(f"snapshot of {args.table}: {len(running)} of {len(positions)} groups with a committed position are "
          f"snapshotting" + (f", {done} snapshotted and stopped (initial_only)" if done else ""))
    for group, progress in sorted(running.items(), key=lambda item: str(item[0])):
        assert progress is not None
        after = "none yet" if progress.after_token is None else str(progress.after_token)
        print(f"  {group!s:60} {progress.kind:12} rows read up to token {after}")
    return 0
