"""`cdc-bridge status` and `cdc-bridge offsets show|reset`: what the workers of one `name` own,
where each group stands, and how to move it (offsets are plain records of the offsets topic).

Every failure is one `error: <setting>: <reason>` line on stderr: Kafka is probed first (a refused
password or certificate names its setting, exit 2; no answer, exit 1), and any later Kafka
failure is reported the same way instead of a traceback."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from bridge.cli.arguments import add_config_arguments, config_from_args
from bridge.control.connector_state import connector_status, live_statuses, worker_id
from bridge.control.control_topic import ControlTopic
from bridge.kafka.access import check_access
from bridge.kafka.client_log import client_logger, with_logger
from bridge.kafka.errors import KafkaSettingError, KafkaUnavailableError
from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.offsets_topic import CorruptRecord, OffsetsTopic
from bridge.kafka.slots import slot_of
from bridge.kafka.status_topic import read_statuses
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position
from bridge.settings import BridgeConfig

TIMEOUT_S = 15.0


def register(commands: Any) -> None:
    status = commands.add_parser("status", help="slots, owners, groups, committed positions, lag and catch-up ETA")
    add_config_arguments(status)
    status.add_argument("--sample-s", type=float, default=5.0, metavar="S",
                        help="read the positions twice, S seconds apart, for the catch-up rate and ETA (0: once)")
    status.set_defaults(handler=kafka_command(_status))
    offsets = commands.add_parser("offsets", help="show or reset the committed positions")
    actions = offsets.add_subparsers(dest="offsets_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="every committed position, as stored (Connect's format)")
    add_config_arguments(show)
    show.set_defaults(handler=kafka_command(_show))
    reset = actions.add_parser("reset", help="forget committed positions (groups restart from the lookback/TTL)")
    add_config_arguments(reset)
    reset.add_argument("--table", metavar="KS.TABLE", help="only this table's groups")
    reset.add_argument("--corrupt", action="store_true",
                       help="only the unreadable records of this connector (`offsets show` lists them)")
    reset.add_argument("--force", action="store_true", help="even while workers are running")
    reset.set_defaults(handler=kafka_command(_reset, _table_problem))


def kafka_command(body: Callable[[argparse.Namespace, BridgeConfig], int],
                   arguments: Callable[[argparse.Namespace, BridgeConfig], str | None] | None = None,
                   ) -> Callable[[argparse.Namespace], int]:
    """Load the settings, check the arguments, probe Kafka, run `body`; every Kafka failure
    becomes one line."""

    def run(args: argparse.Namespace) -> int:
        config = config_from_args(args)
        if config is None:
            return 2
        problem = arguments(args, config) if arguments is not None else None
        if problem is not None:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        servers = config.kafka_client_config().get("bootstrap.servers", "?")
        # librdkafka logs every reconnect attempt; this command reports what failed itself, in one line.
        client_logger().setLevel(logging.CRITICAL)
        try:
            check_access(config.kafka_client_config(), TIMEOUT_S)
            return body(args, config)
        except KafkaSettingError as error:
            print(f"error: {error.key}: {error.reason}", file=sys.stderr)
            return 2
        except KafkaUnavailableError as error:
            print(f"error: kafka.bootstrap.servers: {servers}: {error}", file=sys.stderr)
            return 1
        except KafkaException as error:
            print(f"error: kafka.bootstrap.servers: {servers}: {error.args[0].str()}", file=sys.stderr)
            return 1

    return run


def read_offsets(config: BridgeConfig, settled: bool = False) -> tuple[dict[GroupId, Position], list[CorruptRecord]]:
    """The committed positions and the unreadable records of this connector still in force.
    `settled`: also wait for open transactions to end (one may still commit offsets), as a
    command that writes them must; a report reads what is committed now."""
    topic = OffsetsTopic(config.kafka_client_config(), config.offsets_topic, config.name, report=True)
    try:
        topic.start(TIMEOUT_S)
        topic.catch_up(TIMEOUT_S, committed_only=not settled)
        corrupt = topic.corrupt_records()
        return {g: p for g, p in topic.positions.items() if g not in topic.corrupt}, corrupt
    finally:
        topic.close()


def _members(config: BridgeConfig) -> dict[int, str]:
    """slot -> owner (instance id, or client id and host)."""
    return _slot_group(config)[0]


def _slot_group(config: BridgeConfig) -> tuple[dict[int, str], set[str]]:
    """(slot -> owner (instance id, or client id and host), the member ids of the slot group)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(with_logger(config.kafka_client_config()))
    group = f"{config.name}-workers"
    try:
        description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    except KafkaException as error:
        raise KafkaUnavailableError(f"cannot describe the consumer group {group}: {error.args[0].str()}") from None
    owners: dict[int, str] = {}
    for member in description.members:
        who = member.group_instance_id or f"{member.client_id}@{member.host}"
        for tp in member.assignment.topic_partitions:
            owners[tp.partition] = who
    return owners, {member.member_id for member in description.members}


def _status(args: argparse.Namespace, config: BridgeConfig) -> int:
    (before, corrupt), (owners, members) = read_offsets(config), _slot_group(config)
    taken = time.time()
    after = before
    if args.sample_s > 0:
        time.sleep(args.sample_s)
        after, corrupt = read_offsets(config)
    now = time.time()
    confidence_s = config.confidence_window_size / 1000
    print(f"workers of {config.name}: {len(set(owners.values()))}, slots owned {len(owners)}/{config.slots_count}")
    print(connector_line(config, members, now))
    print(f"{'group':60} {'slot':>4} {'owner':30} {'lag_s':>8}  position")
    lags = group_lags(after, now - confidence_s)
    for group, position in sorted(after.items(), key=lambda item: str(item[0])):
        slot = slot_of(config.name, group, config.slots_count)
        lag = lags[group]
        print(f"{group!s:60} {slot:>4} {owners.get(slot, '-'):30} {'done' if lag is None else f'{lag:.1f}':>8}  "
              f"{encode_value(position).decode()}")
    then = table_lags(group_lags(before, taken - confidence_s))
    for table, lag_s in sorted(table_lags(lags).items()):
        print(f"table {table}: {catch_up_text(then.get(table), lag_s, now - taken, config.heartbeat_interval_ms)}")
    for table, line in sorted(snapshot_lines(after).items()):
        print(f"table {table}: {line}")
    for record in corrupt:
        print(f"corrupt: {record.describe()}")
    for status in read_statuses(config.kafka_client_config(), config.status_topic, TIMEOUT_S):
        if status.member_id in members:  # a record of a worker no longer in the group is stale
            for failed, reason in sorted(status.failed.items()):
                print(f"failed: {failed} on {status.worker}: {reason}")
    return 0


def connector_line(config: BridgeConfig, members: set[str], now: float) -> str:
    """The connector's state as Connect's /status says it, the target state, and what each live
    worker has applied (docs/worker.md, the mapping to Kafka Connect)."""
    target = ControlTopic(config).read_target_state(TIMEOUT_S)
    live = live_statuses(read_statuses(config.kafka_client_config(), config.status_topic, TIMEOUT_S), members,
                         int(now * 1000))
    state = connector_status(config.name, target, live, config.slots_count)["connector"]["state"]
    applied = ", ".join(f"{worker_id(status)} {status.state}" for status in sorted(live, key=worker_id))
    return f"connector {config.name}: {state} (target state {target}; applied: {applied or 'no live worker'})"


def snapshot_lines(positions: dict[GroupId, Position]) -> dict[str, str]:
    """Per table with a snapshot under way: how many of its groups are snapshotting, of which kind
    (`cdc-bridge snapshot status --table` lists them)."""
    running: dict[str, list[str]] = {}
    for group, position in positions.items():
        if position.snapshot is not None and not position.snapshot.completed:
            running.setdefault(f"{group.keyspace}.{group.table}", []).append(position.snapshot.kind)
    totals = {table: sum(1 for g in positions if f"{g.keyspace}.{g.table}" == table) for table in running}
    return {table: f"snapshot ({', '.join(sorted(set(kinds)))}) running in {len(kinds)} of {totals[table]} groups"
            for table, kinds in running.items()}


def group_lags(positions: dict[GroupId, Position], horizon_s: float) -> dict[GroupId, float | None]:
    """Seconds each group's position is behind what may be read; None for a group that is done.
    A vnode group is done once its position reaches the next generation any group of its table
    names (a generation ends where the next begins). A tablet group (`vnode_id` 0x...) ends when
    a later stream set closes its stream, which the offsets cannot tell: it counts as reading."""
    generations: dict[tuple[str, str], set[int]] = {}
    for group in positions:
        if not group.vnode_id.startswith("0x"):
            generations.setdefault((group.keyspace, group.table), set()).add(group.generation_start_ms)
    lags: dict[GroupId, float | None] = {}
    for group, position in positions.items():
        later = [g for g in generations.get((group.keyspace, group.table), ()) if g > group.generation_start_ms]
        done = bool(later) and position.window_start_us >= min(later) * 1000
        lags[group] = None if done else max(0.0, horizon_s - position.window_start_us / 1e6)
    return lags


def table_lags(lags: dict[GroupId, float | None]) -> dict[str, float]:
    """The lag of each table's slowest group that is still reading."""
    tables: dict[str, float] = {}
    for group, lag in lags.items():
        table = f"{group.keyspace}.{group.table}"
        tables[table] = max(tables.get(table, 0.0), lag or 0.0)
    return tables


def catch_up_text(before_s: float | None, lag_s: float, seconds: float, heartbeat_ms: int) -> str:
    """An idle group's committed position moves once per heartbeat (`heartbeat.interval.ms`):
    a lag within a heartbeat (and some slack) is a group keeping up."""
    text = f"lag {lag_s:.1f} s (slowest group)"
    if lag_s < heartbeat_ms / 1000 + 5:
        return f"{text}, keeping up"
    if before_s is None or seconds <= 0:
        return text
    shrink = (before_s - lag_s) / seconds  # seconds of backlog gone per second
    if shrink <= 0:
        return f"{text}, not gaining (sampled over {seconds:.0f} s)"
    return f"{text}, reading {shrink + 1:.1f}x real time, ETA {lag_s / shrink:.0f} s"


def _show(args: argparse.Namespace, config: BridgeConfig) -> int:
    """The positions on stdout; each unreadable record of this connector on stderr (exit 1)."""
    positions, corrupt = read_offsets(config)
    for group, position in sorted(positions.items(), key=lambda item: str(item[0])):
        print(f"{encode_key(config.name, group).decode()} {encode_value(position).decode()}")
    for record in corrupt:
        print(f"error: offset.storage.topic: {record.describe()} (key {record.key.decode(errors='replace')})",
              file=sys.stderr)
    return 1 if corrupt else 0


def _reset(args: argparse.Namespace, config: BridgeConfig) -> int:
    if _members(config) and not args.force:
        print(f"error: workers of {config.name} are running; stop them first or pass --force", file=sys.stderr)
        return 2
    from confluent_kafka import Producer

    positions, corrupt = read_offsets(config, settled=True)
    # (key, partition): an unreadable record is tombstoned in its own partition, wherever the tool
    # that wrote it put it; positions go where the workers write them (murmur2, as Connect).
    targets: list[tuple[bytes, int | None]]
    if args.corrupt:
        targets = [(r.key, r.partition) for r in corrupt
                   if args.table in (None, r.group and f"{r.group.keyspace}.{r.group.table}")]
    else:
        targets = [(encode_key(config.name, g), None) for g in positions
                   if args.table in (None, f"{g.keyspace}.{g.table}")]
    producer = Producer({**with_logger(config.kafka_client_config()), "partitioner": "murmur2_random",
                         "enable.idempotence": True})
    for key, partition in targets:
        if partition is None:
            producer.produce(config.offsets_topic, None, key)  # tombstone
        else:
            producer.produce(config.offsets_topic, None, key, partition=partition)
    if producer.flush(TIMEOUT_S):
        print("error: Kafka did not acknowledge the reset in time", file=sys.stderr)
        return 1
    print(f"reset {len(targets)} {'unreadable records' if args.corrupt else 'group positions'} of {config.name}")
    return 0


def _table_problem(args: argparse.Namespace, config: BridgeConfig) -> str | None:
    """Why `--table` names no table of this worker's (None: fine, or not given)."""
    table: str | None = args.table
    if table is None:
        return None
    keyspace, dot, name = table.partition(".")
    if not (dot and keyspace and name) or "." in name:
        return f"--table: {table!r} is not keyspace.table"
    configured = [f"{ks}.{t}" for ks, t in config.tables()]
    if table not in configured:
        return f"--table: {table} is not in scylla.table.names ({', '.join(configured)})"
    return None
