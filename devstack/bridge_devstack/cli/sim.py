"""`cdc-bridge sim ...`: run CQL through the emulator, change the virtual topology, generate load."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from bridge.scylla.cdc_time import micros_of
from bridge.scylla.model import ChangeRecord
from bridge_devstack.sim.cql.lexer import split_statements
from bridge_devstack.sim.emulator import Emulator
from bridge_devstack.sim.errors import ConfigurationError, SimError
from bridge_devstack.sim.load import LoadGenerator, LoadSpec, bulk_fill, parse_mix
from bridge_devstack.sim.settings import SimSettings

Handler = Callable[[argparse.Namespace], int]


def register(subparsers: Any) -> None:
    """Add the `sim` command and its subcommands to the top-level `add_subparsers()` object."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection and metadata")
    group.add_argument(
        "--contact-points",
        help="Cassandra hosts, comma separated (env CDC_BRIDGE_SIM_CONTACT_POINTS; default 127.0.0.1)",
    )
    group.add_argument("--port", type=int,
                       help="CQL port (env CDC_BRIDGE_SIM_PORT; default 9042 plus CDC_BRIDGE_STACK_PORT_OFFSET)")
    group.add_argument(
        "--vnodes-keyspace",
        help="keyspace of the vnode generation tables (env"
        " CDC_BRIDGE_SCYLLA_CDC_METADATA_VNODES_KEYSPACE; default sim_system_distributed)",
    )
    group.add_argument(
        "--tablets-keyspace",
        help="keyspace of the tablet stream tables (env"
        " CDC_BRIDGE_SCYLLA_CDC_METADATA_TABLETS_KEYSPACE; default sim_system)",
    )

    sim = subparsers.add_parser(
        "sim",
        help="the ScyllaDB CDC emulator on Cassandra",
        description="Emulate ScyllaDB CDC on the local Cassandra: base writes, log rows, stream metadata.",
    )
    commands = sim.add_subparsers(dest="sim_command", metavar="SUBCOMMAND", required=True)

    run = commands.add_parser(
        "exec",
        parents=[common],
        help="run CQL statements through the emulator",
        description="Run one statement (or batch), or a file of ';'-separated statements, in"
        " order; print the CDC records each write logged.",
    )
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("cql", nargs="?", help="one statement or BEGIN ... APPLY BATCH")
    source.add_argument("-f", "--file", help="a file of ';'-separated statements ('-' for stdin)")
    run.add_argument("-k", "--keyspace", help="keyspace for unqualified table names (like USE)")
    run.add_argument("--json", action="store_true", help="print each record as one JSON line")
    run.set_defaults(handler=_exec)

    boot = commands.add_parser(
        "bootstrap-node",
        parents=[common],
        help="add a virtual node: new vnode generation",
        description="Publish a new CDC generation for the virtual topology plus one node,"
        " starting --delay seconds from now.",
    )
    boot.add_argument("--delay", type=float, help="seconds until the generation starts (default 5)")
    boot.add_argument("--vnodes", type=int, help="vnodes of the new node (default 8)")
    boot.add_argument("--shards", type=int, help="shards of the new node (default 2)")
    boot.set_defaults(handler=_bootstrap)

    tablets = commands.add_parser(
        "tablets",
        help="change a tablets table's CDC stream set",
        description="Split, merge or partially replace the tablets of a table in a tablets"
        " keyspace; a new stream set starts --delay seconds from now.",
    )
    actions = tablets.add_subparsers(dest="tablets_action", metavar="ACTION", required=True)
    for name, text in (
        ("split", "split every tablet in two"),
        ("merge", "merge tablets pairwise"),
        ("change", "close some streams and open replacements"),
    ):
        action = actions.add_parser(name, parents=[common], help=text, description=text.capitalize() + ".")
        action.add_argument("keyspace")
        action.add_argument("table")
        action.add_argument("--delay", type=float, help="seconds until the new stream set starts (default 2)")
        if name == "change":
            action.add_argument(
                "--positions",
                required=True,
                help="tablet positions (token order, from 0) whose streams to replace, e.g. 0,3",
            )
            action.add_argument(
                "--split", action="store_true", help="split the chosen tablets instead of giving them a fresh stream"
            )
        action.set_defaults(handler=_tablets)

    load = commands.add_parser(
        "load",
        parents=[common],
        help="generate CDC load",
        description="Paced mixed writes over several tables (default), or --bulk N changes"
        " as fast as possible. Prints a JSON report.",
    )
    load.add_argument("-k", "--keyspace", required=True, help="keyspace of the load tables (created if missing)")
    load.add_argument("--tables", type=int, default=2, help="number of tables load_0..load_N-1 (default 2)")
    load.add_argument("--rate", type=float, default=100.0, help="target operations per second (default 100)")
    load.add_argument("--duration", type=float, default=10.0, help="seconds to run (default 10)")
    load.add_argument("--count", type=int, help="stop after this many operations")
    load.add_argument(
        "--mix",
        default="insert=4,update=3,collection=1,delete=1,batch=1",
        help="operation weights; kinds: insert, update, collection, delete, range_delete, partition_delete, batch",
    )
    load.add_argument("--partitions", type=int, default=50, help="partition keys per table (default 50)")
    load.add_argument(
        "--cdc", default="{'enabled': true, 'preimage': true, 'postimage': true}", help="cdc options of created tables"
    )
    load.add_argument("--bulk", type=int, metavar="N", help="bulk mode: write N changes into table 'bulk'")
    load.add_argument("--concurrency", type=int, default=128, help="bulk mode: requests in flight (default 128)")
    load.add_argument("--log-only", action="store_true", help="bulk mode: skip the base-table writes")
    load.add_argument(
        "--workers", type=int, default=1, help="mixed mode: threads, each on its own partitions (default 1)"
    )
    load.add_argument("--seed", type=int)
    load.set_defaults(handler=_load)


def _settings(args: argparse.Namespace) -> SimSettings:
    points = tuple(p.strip() for p in args.contact_points.split(",")) if args.contact_points else None
    return SimSettings.from_env(
        contact_points=points,
        port=args.port,
        vnodes_keyspace=args.vnodes_keyspace,
        tablets_keyspace=args.tablets_keyspace,
    )


def _guarded(body: Callable[[], int]) -> int:
    """Every failure a user can fix is one `error:` line naming the problem (and what fixes it)."""
    from cassandra.cluster import NoHostAvailable

    try:
        return body()
    except SimError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except NoHostAvailable as error:
        where = ", ".join(sorted(error.errors)) or "the contact points"
        print(f"error: no Cassandra answers at {where}: start the local stack (`cdc-bridge stack up`) or point"
              " --contact-points/--port (CDC_BRIDGE_SIM_CONTACT_POINTS, CDC_BRIDGE_SIM_PORT) at one", file=sys.stderr)
        return 2


def _read_script(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as script:
            return script.read()
    except OSError as error:
        raise ConfigurationError(f"-f {path}: cannot read it ({error.strerror})") from None


def _exec(args: argparse.Namespace) -> int:
    def body() -> int:
        statements = split_statements(_read_script(args.file)) if args.file else [args.cql]
        with Emulator.connect(settings=_settings(args), keyspace=args.keyspace) as emu:
            for index, statement in enumerate(statements, 1):
                try:
                    if statement.lstrip().lower().startswith("select"):
                        for row in emu.session.execute(statement):
                            print(row)
                        continue
                    for record in emu.execute(statement):
                        print(_record_json(record) if args.json else _record_text(record))
                except SimError as error:
                    where = f"statement {index}: " if len(statements) > 1 else ""
                    raise type(error)(f"{where}{error}") from None
        return 0

    return _guarded(body)


def _bootstrap(args: argparse.Namespace) -> int:
    def body() -> int:
        with Emulator.connect(settings=_settings(args)) as emu:
            generation = emu.bootstrap_node(args.delay, args.vnodes, args.shards)
        start = datetime.fromtimestamp(generation.timestamp_ms / 1000, UTC).isoformat(timespec="milliseconds")
        streams = sum(len(r.streams) for r in generation.ranges)
        print(f"new generation {generation.timestamp_ms} ({start}): {len(generation.ranges)} vnodes, {streams} streams")
        return 0

    return _guarded(body)


def _tablets(args: argparse.Namespace) -> int:
    def body() -> int:
        with Emulator.connect(settings=_settings(args)) as emu:
            if args.tablets_action == "split":
                result = emu.tablets_split(args.keyspace, args.table, args.delay)
            elif args.tablets_action == "merge":
                result = emu.tablets_merge(args.keyspace, args.table, args.delay)
            else:
                positions = [int(p) for p in args.positions.split(",") if p.strip()]
                result = emu.tablets_change(args.keyspace, args.table, positions, split=args.split, delay_s=args.delay)
        print(f"new stream set {result.timestamp_ms}: {len(result.streams)} streams")
        for stream in result.streams:
            print(f"  {stream}")
        return 0

    try:
        return _guarded(body)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _load(args: argparse.Namespace) -> int:
    def body() -> int:
        with Emulator.connect(settings=_settings(args), seed=args.seed) as emu:
            if not emu.catalog.keyspace_exists(args.keyspace):
                emu.execute(
                    f"CREATE KEYSPACE {args.keyspace} WITH replication ="
                    " {'class': 'SimpleStrategy', 'replication_factor': 1}"
                )
            if args.bulk:
                report = bulk_fill(
                    emu, args.keyspace, "bulk", args.bulk, concurrency=args.concurrency, base=not args.log_only
                )
                print(json.dumps({"mode": "bulk", **report.as_dict()}))
                return 0
            spec = LoadSpec(
                args.keyspace,
                tables=args.tables,
                rate=args.rate,
                duration_s=args.duration,
                operations=args.count,
                mix=parse_mix(args.mix),
                partitions=args.partitions,
                cdc=args.cdc,
                seed=args.seed,
                workers=args.workers,
            )
            generator = LoadGenerator(emu, spec)
            generator.prepare()
            report = generator.run()
            print(json.dumps({"mode": "mixed", "target_rate": args.rate, **report.as_dict()}))
        return 0

    return _guarded(body)


def _record_text(record: ChangeRecord) -> str:
    lines = [f"{record.keyspace}.{record.table} stream {record.stream_id} time {record.time} (µs {record.micros})"]
    for row in record.rows:
        values = {k: v for k, v in row.values.items() if v is not None}
        ttl = f" ttl={row.ttl}" if row.ttl is not None else ""
        end = " end" if row.end_of_batch else ""
        lines.append(f"  {row.batch_seq_no} op={int(row.operation)}{ttl}{end} {_jsonable(values)}")
    return "\n".join(lines)


def _record_json(record: ChangeRecord) -> str:
    return json.dumps(
        {
            "keyspace": record.keyspace,
            "table": record.table,
            "stream_id": str(record.stream_id),
            "time": str(record.time),
            "micros": micros_of(record.time),
            "rows": [
                {
                    "seq": row.batch_seq_no,
                    "op": int(row.operation),
                    "ttl": row.ttl,
                    "end_of_batch": row.end_of_batch,
                    "values": _jsonable({k: v for k, v in row.values.items() if v is not None}),
                }
                for row in record.rows
            ],
        }
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted((_jsonable(v) for v in value), key=str)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, uuid.UUID | Decimal | datetime):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)

