"""`cdc-bridge status` and `cdc-bridge offsets show|reset`: what the workers of one `name` own,
where each group stands, and how to move it (offsets are plain records of the offsets topic)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bridge.config import BridgeConfig
from bridge.config_cli import add_config_arguments, config_from_args
from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.offsets_topic import OffsetsTopic
from bridge.kafka.slots import slot_of
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position

TIMEOUT_S = 15.0


def register(commands: Any) -> None:
    status = commands.add_parser("status", help="slots, owners, groups, committed positions and lag")
    add_config_arguments(status)
    status.set_defaults(handler=_status)
    offsets = commands.add_parser("offsets", help="show or reset the committed positions")
    actions = offsets.add_subparsers(dest="offsets_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="every committed position, as stored (Connect's format)")
    add_config_arguments(show)
    show.set_defaults(handler=_show)
    reset = actions.add_parser("reset", help="forget committed positions (groups restart from the lookback/TTL)")
    add_config_arguments(reset)
    reset.add_argument("--table", metavar="KS.TABLE", help="only this table's groups")
    reset.add_argument("--force", action="store_true", help="even while workers are running")
    reset.set_defaults(handler=_reset)


def _positions(config: BridgeConfig) -> dict[GroupId, Position]:
    topic = OffsetsTopic(config.kafka_client_config(), config.offsets_topic, config.name)
    try:
        topic.start(TIMEOUT_S)
        topic.catch_up(TIMEOUT_S)
        return dict(topic.positions)
    finally:
        topic.close()


def _members(config: BridgeConfig) -> dict[int, str]:
    """slot -> owner (instance id, or client id and host)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(with_logger(config.kafka_client_config()))
    group = f"{config.name}-workers"
    description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    owners: dict[int, str] = {}
    for member in description.members:
        who = member.group_instance_id or f"{member.client_id}@{member.host}"
        for tp in member.assignment.topic_partitions:
            owners[tp.partition] = who
    return owners


def _status(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config is None:
        return 2
    try:
        positions, owners = _positions(config), _members(config)
    except KafkaUnavailableError as error:
        print(f"error: kafka.bootstrap.servers: {error}", file=sys.stderr)
        return 1
    now_us = time.time_ns() // 1000
    horizon = now_us - config.confidence_window_size * 1000
    print(f"workers of {config.name}: {len(set(owners.values()))}, slots owned {len(owners)}/{config.slots_count}")
    print(f"{'group':60} {'slot':>4} {'owner':30} {'lag_s':>8}  position")
    lag_by_table: dict[str, float] = {}
    for group, position in sorted(positions.items(), key=lambda item: str(item[0])):
        slot = slot_of(config.name, group, config.slots_count)
        lag_s = max(0.0, (horizon - position.window_start_us) / 1e6)
        table = f"{group.keyspace}.{group.table}"
        lag_by_table[table] = max(lag_by_table.get(table, 0.0), lag_s)
        print(f"{group!s:60} {slot:>4} {owners.get(slot, '-'):30} {lag_s:8.1f}  "
              f"{encode_value(position).decode()}")
    for table, lag_s in sorted(lag_by_table.items()):
        print(f"table {table}: lag {lag_s:.1f} s (oldest group)")
    return 0


def _show(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config is None:
        return 2
    for group, position in sorted(_positions(config).items(), key=lambda item: str(item[0])):
        print(f"{encode_key(config.name, group).decode()} {encode_value(position).decode()}")
    return 0


def _reset(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config is None:
        return 2
    if _members(config) and not args.force:
        print(f"error: workers of {config.name} are running; stop them first or pass --force", file=sys.stderr)
        return 2
    from confluent_kafka import Producer

    groups = [g for g in _positions(config) if args.table in (None, f"{g.keyspace}.{g.table}")]
    producer = Producer({**with_logger(config.kafka_client_config()), "partitioner": "murmur2_random",
                         "enable.idempotence": True})
    for group in groups:
        producer.produce(config.offsets_topic, None, encode_key(config.name, group))  # tombstone
    if producer.flush(TIMEOUT_S):
        print("error: Kafka did not acknowledge the reset in time", file=sys.stderr)
        return 1
    print(f"reset {len(groups)} group positions of {config.name}")
    return 0
