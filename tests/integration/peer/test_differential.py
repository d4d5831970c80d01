"""The Java scylla-cdc-source-connector as the oracle: it and `cdc-bridge run` read the same seeded
random workloads through the emulator, written across a vnode generation switch, and every record,
key and header must be equal byte for byte (JSON; in Avro through the stack's Apicurio, as decoded
values, and the registered schemas too) but for the fields docs/envelope.md lists as differing by
design. Legacy JSON with and without schemas, legacy Avro, and the advanced format in two modes
(`CDC_BRIDGE_TEST_PEER_ADVANCED=0` leaves the advanced ones out; `CDC_BRIDGE_TEST_PEER_FORMATS`,
comma-separated names, runs only those).

One Kafka Connect standalone JVM for the module (its first record takes 20-40 s), one connector
and one bridge per format, each reading every seed's table; both reach Cassandra through the CQL
proxy that shows the emulator's metadata keyspace as `system_distributed` (the bridge with its
default `scylla.cdc.metadata.vnodes.keyspace`). Skipped, saying why, where the connector's jar is
absent (`CDC_BRIDGE_STACK_PEER_DIR`, default ../shared/peer/). `CDC_BRIDGE_TEST_PEER_SEEDS` (default 3) and
`CDC_BRIDGE_TEST_PEER_SEED_BASE` (default 1) choose the seeds; a failure names the seed (the table
`l<seed>` or `a<seed>`) and the first differing record of each side.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from bridge_devstack.sim import Emulator, SimSettings
from bridge_devstack.stack.connect_standalone import (
    ConnectStandalone,
    apicurio_avro_settings,
    avro_converter_dir,
    connect_lib,
    peer_dir,
    peer_jar,
)
from bridge_devstack.stack.cql_proxy import CqlRenamingProxy
from bridge_devstack.stack.layout import Endpoints, port_offset
from tests.integration.peer.avro_compare import AvroDecoder, registered, schema_difference
from tests.integration.peer.compare import Record, advanced_difference, first_difference, read_prefix
from tests.integration.peer.workload import ADVANCED, SCALARS, UDT, Workload, advanced_table, legacy_table
from tests.integration.worker.harness import WorkerProcess, start_worker, worker_properties, write_properties

# Below Linux's ephemeral ports (32768-60999), which any process's connections or a Spark
# session's local servers may hold: 35043 once was (26000 + 9043), failing the module's setup.
OFFSET = port_offset(26000)
PROXY_PORT = OFFSET + 1043
REST_PORT = OFFSET + 1083
# The module's own metadata keyspace (its generations are its own, dropped at the end): 18
# characters, which the proxy shows as system_distributed.
METADATA_KEYSPACE = f"sim_sysdist_{uuid.uuid4().hex[:6]}"
# Past the generation switch: one row per table at a partition the workload never writes, which
# both sides must deliver (a side that stopped at the old generation is caught there).
SENTINEL = 99
SENTINEL_KEY = re.compile(f'"pk":{SENTINEL}[,}}]'.encode())
SEEDS = int(os.environ.get("CDC_BRIDGE_TEST_PEER_SEEDS", "3"))
SEED_BASE = int(os.environ.get("CDC_BRIDGE_TEST_PEER_SEED_BASE", "1"))
STATEMENTS = 40
JSON = "org.apache.kafka.connect.json.JsonConverter"


@dataclass(frozen=True)
class Format:
    name: str
    tables: str  # "l" (legacy shape) or "a" (advanced shape)
    schemas: bool
    settings: tuple[tuple[str, str], ...] = ()
    # Advanced with image modes (before, after not none): keys with an image-less change differ by
    # design and are left out of the comparison; the record counts then differ too.
    images: tuple[bool, bool] | None = None
    # Avro through the registry (Apicurio's converter on the connector's side): records compared as
    # decoded values, and the registered schemas compared.
    avro: bool = False


def _advanced(before: str, after: str, placement: str) -> tuple[tuple[str, str], ...]:
    return (
        ("cdc.output.format", "advanced"),
        ("cdc.include.before", before),
        ("cdc.include.after", after),
        ("cdc.include.primary-key.placement", placement),
    )


FORMATS = [
    Format("legacy-schemas", "l", True),
    Format("legacy-plain", "l", False),
    Format("legacy-avro", "l", True, avro=True),
]
# The advanced format (docs/envelope.md section 6, "Checked against the connector").
# Where ScyllaDB writes no image (an update creating its row, a delete of an absent row, the first
# of two delta rows of one row in a record) the connector holds, loses or mis-pairs the change and
# the bridge sends it with that image null, a difference kept by design: those keys are left out
# and every other key must be equal. A placement without kafka-key is not run: the connector's task
# fails at its first record there (a null key for its required key schema).
ADVANCED_FORMATS = [
    Format(
        "advanced-full-all",
        "a",
        True,
        _advanced("full", "full", "kafka-key,payload-after,payload-before,payload-key,kafka-headers"),
        (True, True),
    ),
    Format(
        "advanced-updated",
        "a",
        False,
        _advanced("only-updated", "only-updated", "kafka-key,payload-after"),
        (True, True),
    ),
]
if os.environ.get("CDC_BRIDGE_TEST_PEER_ADVANCED") != "0":  # =0 runs the legacy formats alone
    FORMATS += ADVANCED_FORMATS
if os.environ.get("CDC_BRIDGE_TEST_PEER_FORMATS"):  # a comma-separated choice of the names above
    _chosen = os.environ["CDC_BRIDGE_TEST_PEER_FORMATS"].split(",")
    FORMATS = [f for f in FORMATS if f.name in _chosen]


@dataclass
class Booting:
    connect: ConnectStandalone
    future: Future[None]
    started: float


@dataclass
class Outputs:
    peer: dict[str, list[Record]]
    ours: dict[str, list[Record]]
    prefixes: dict[str, tuple[str, str]]
    worker_logs: dict[str, Path] = field(default_factory=dict)  # format name: its bridge worker's log

    def worker_log_tail(self, name: str, lines: int = 5) -> str:
        path = self.worker_logs.get(name)
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path else "(no log)"


def _seeds() -> list[int]:
    return list(range(SEED_BASE, SEED_BASE + SEEDS))


def _seed_of(difference: str) -> str:
    """The seed whose table (`l<seed>` / `a<seed>`) a difference names."""
    found = re.match(r"table [^.]+\.[la](\d+),", difference)
    return f"seed {found.group(1)}" if found else f"seeds {_seeds()}"


@pytest.fixture(scope="module")
def jar() -> Path:
    found = peer_jar()
    if found is None:
        pytest.skip(
            f"the Java connector's jar is not in {peer_dir()} (set CDC_BRIDGE_STACK_PEER_DIR):"
            " differential tests not run"
        )
    return found


@pytest.fixture(scope="module")
def peer_keyspace(stack: Endpoints, cassandra_session: Any, jar: Path) -> Iterator[str]:
    """The seeded workloads, written once through the emulator (metadata in the 18-character keyspace)."""
    keyspace = f"peer_{uuid.uuid4().hex[:8]}"
    created = time.monotonic()
    emu = Emulator(cassandra_session, SimSettings(vnodes_keyspace=METADATA_KEYSPACE))
    emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    emu.execute(UDT.format(ks=keyspace))
    shapes = [("l", legacy_table, SCALARS, "text"), ("a", advanced_table, ADVANCED, "int")]
    shapes = [shape for shape in shapes if any(f.tables == shape[0] for f in FORMATS)]
    for seed in _seeds():
        for letter, create, _, _ in shapes:
            emu.execute(create(keyspace, f"{letter}{seed}"))
    statements = [
        Workload(seed, keyspace, f"{letter}{seed}", columns, static).statements(STATEMENTS)
        for seed in _seeds()
        for letter, _, columns, static in shapes
    ]
    print(f"peer tables created in {time.monotonic() - created:.1f} s")
    try:
        # Half of every table's statements in the first generation, a vnode generation switch (a
        # node bootstrapped), the other half and the sentinel rows in the new generation.
        started = time.monotonic()
        for table_statements in statements:
            for statement in table_statements[: STATEMENTS // 2]:
                emu.execute(statement)
        generation = emu.bootstrap_node(delay_s=1)
        while time.time() * 1000 < generation.timestamp_ms + 200:
            time.sleep(0.1)
        for table_statements in statements:
            for statement in table_statements[STATEMENTS // 2 :]:
                emu.execute(statement)
        for seed in _seeds():
            for letter, *_ in shapes:
                emu.execute(f"INSERT INTO {keyspace}.{letter}{seed} (pk, ck, c_int) VALUES ({SENTINEL}, 0, 7)")
        print(f"peer workloads written in {time.monotonic() - started:.1f} s")
        yield keyspace
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {METADATA_KEYSPACE}", timeout=120)


def _connector_config(fmt: Format, prefix: str, tables: str, registry: str) -> dict[str, str]:
    schemas = "true" if fmt.schemas else "false"
    converters = {
        "key.converter": JSON,
        "value.converter": JSON,
        "key.converter.schemas.enable": schemas,
        "value.converter.schemas.enable": schemas,
    }
    if fmt.avro:
        v2 = registry.replace("/apis/ccompat/v7", "/apis/registry/v2")
        converters = {**apicurio_avro_settings("key.converter", v2), **apicurio_avro_settings("value.converter", v2)}
    return {
        "tasks.max": "1",
        "topic.prefix": prefix,
        "scylla.cluster.ip.addresses": f"127.0.0.1:{PROXY_PORT}",
        "scylla.table.names": tables,
        "scylla.confidence.window.size": "2000",
        "scylla.query.time.window.size": "10000",
        "scylla.initial.lookback.ms": "300000",
        # An old generation's vnodes without changes save their offsets only by heartbeats, and the
        # connector moves to the next generation once every one is past its end (checked every 30 s):
        # at the default 30 s the switch waits a check or two more.
        "heartbeat.interval.ms": "5000",
        **converters,
        **dict(fmt.settings),
    }


def _sentinel_tables(records: list[Record]) -> set[str]:
    """The tables whose sentinel row (written last, past the generation switch) is among `records`
    (JSON keys; Avro ones decoded first)."""
    return {r.table for r in records if r.key is not None and SENTINEL_KEY.search(r.key)}


def _settle(
    bootstrap: str, prefixes: dict[str, tuple[str, str]], timeout_s: float, decoder: AvroDecoder, quiet_s: float = 6.0
) -> Outputs:
    """Read both sides of every format until, for each, both sides hold every table's sentinel
    row (the last write, past the generation switch: a side still before it, e.g. the connector
    waiting for its next generation check, may stay still for half a minute), both counts are
    equal (or, for a format whose counts differ by design, not zero) and have not moved for
    `quiet_s` (the rest of the sentinels' windows); or the time is out (then the comparison
    shows what is missing)."""
    unequal = {f.name for f in FORMATS if f.images is not None}
    avro = {f.name for f in FORMATS if f.avro}
    deadline = time.monotonic() + timeout_s
    outputs = Outputs({}, {}, prefixes)
    counts: dict[str, tuple[int, int]] = {}
    since: dict[str, float] = {}
    complete: dict[str, bool] = {}
    started = time.monotonic()
    moved: dict[tuple[str, int], float] = {}  # (format, side): when its count last moved, for the timings
    while time.monotonic() < deadline:
        for name, (peer_prefix, our_prefix) in prefixes.items():
            outputs.peer[name] = read_prefix(bootstrap, peer_prefix, "read_uncommitted")
            outputs.ours[name] = read_prefix(bootstrap, our_prefix)
            now = (len(outputs.peer[name]), len(outputs.ours[name]))
            for side in (0, 1):
                if counts.get(name, (-1, -1))[side] != now[side]:
                    moved[name, side] = time.monotonic() - started
            if counts.get(name) != now:
                counts[name], since[name] = now, time.monotonic()
                sides = (outputs.peer[name], outputs.ours[name])
                if name in avro:
                    sides = ([decoder.record(r) for r in sides[0]], [decoder.record(r) for r in sides[1]])
                complete[name] = all(len(_sentinel_tables(side)) == SEEDS for side in sides)
        if all(
            c[0]
            and (c[0] == c[1] or (n in unequal and c[1]))
            and complete[n]
            and time.monotonic() - since[n] >= quiet_s
            for n, c in counts.items()
        ):
            break
        time.sleep(1)
    for name, (peer_count, our_count) in counts.items():
        print(
            f"{name}: connector {peer_count} records (last at {moved[name, 0]:.0f} s),"
            f" bridge {our_count} (last at {moved[name, 1]:.0f} s)"
        )
    return outputs


@pytest.fixture(scope="module")
def kafka_connect(stack: Endpoints, jar: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Booting]:
    """Kafka Connect's JVM, started in a thread (its REST API takes 20-60 s) while `peer_keyspace`
    writes the workloads: `outputs` asks for it first."""
    work = tmp_path_factory.mktemp("connect")
    plugins = (avro_converter_dir(),) if any(f.avro for f in FORMATS) else ()
    connect = ConnectStandalone(jar, connect_lib(), work, stack.kafka_bootstrap, REST_PORT, plugins=plugins)
    with ThreadPoolExecutor(1) as pool:
        booting = Booting(connect, pool.submit(connect.start), time.monotonic())
        try:
            yield booting
        finally:
            booting.future.exception()  # its start is over (up, failed or timed out) before the stop
            connect.stop(timeout_s=15)


@pytest.fixture(scope="module")
def outputs(
    stack: Endpoints,
    kafka_connect: Booting,
    peer_keyspace: str,
    tmp_path_factory: pytest.TempPathFactory,
    kafka_admin: Any,
) -> Iterator[Outputs]:
    work = tmp_path_factory.mktemp("peer")
    connect = kafka_connect.connect
    proxy = CqlRenamingProxy(PROXY_PORT, stack.cassandra_host, stack.cassandra_port, METADATA_KEYSPACE)
    proxy.start()
    workers: list[WorkerProcess] = []
    run = uuid.uuid4().hex[:4]
    prefixes = {fmt.name: (f"J{run}{i}", f"B{run}{i}") for i, fmt in enumerate(FORMATS)}
    try:
        kafka_connect.future.result()
        print(f"Kafka Connect's REST API up {time.monotonic() - kafka_connect.started:.1f} s after its start")
        up = time.monotonic()
        for fmt in FORMATS:
            peer_prefix, our_prefix = prefixes[fmt.name]
            tables = ",".join(f"{peer_keyspace}.{fmt.tables}{seed}" for seed in _seeds())
            connect.add(f"peer-{peer_prefix}", _connector_config(fmt, peer_prefix, tables, stack.schema_registry_url))
            schemas = "true" if fmt.schemas else "false"
            props = worker_properties(
                stack,
                our_prefix,
                tables.split(","),
                **{
                    "scylla__cluster__ip__addresses": f"127.0.0.1:{PROXY_PORT}",
                    "scylla__cdc__metadata__vnodes__keyspace": "system_distributed",
                    "key__converter__schemas__enable": schemas,
                    "value__converter__schemas__enable": schemas,
                },
            )
            if fmt.avro:
                url = stack.schema_registry_url
                props.update({"key.converter": "avro", "value.converter": "avro"})
                props.update({"key.converter.schema.registry.url": url, "value.converter.schema.registry.url": url})
            props.update(dict(fmt.settings))
            workers.append(start_worker(write_properties(work / f"{our_prefix}.properties", props), work, our_prefix))
        print(f"connectors and workers started in {time.monotonic() - up:.1f} s")
        started = time.monotonic()
        decoder = AvroDecoder(SchemaRegistryClient({"url": stack.schema_registry_url}))
        settled = _settle(stack.kafka_bootstrap, prefixes, 180 + 40 * SEEDS, decoder)
        settled.worker_logs = {fmt.name: worker.log_path for fmt, worker in zip(FORMATS, workers, strict=True)}
        print(f"both sides settled in {time.monotonic() - started:.1f} s")
        yield settled
    finally:
        # SIGKILLed: both sides' outputs were read, nothing of them is read afterwards (their
        # graceful stops made the module's teardown 21 s instead of 7)
        ended = time.monotonic()
        for worker in workers:
            if worker.process.poll() is None:
                os.kill(worker.process.pid, signal.SIGKILL)
        connect.stop(timeout_s=0)
        for worker in workers:
            worker.kill()
        proxy.stop()
        _delete_topics(kafka_admin, [p for pair in prefixes.values() for p in pair])
        print(f"workers, Connect and topics gone in {time.monotonic() - ended:.1f} s")


def _delete_topics(kafka_admin: Any, prefixes: list[str]) -> None:
    """Both sides' topics (the bridge's own `<name>-offsets/-config/-status/-slots` and the
    connector's heartbeat topics too): a shared broker keeps no test's."""
    names = [
        t
        for t in kafka_admin.list_topics(timeout=15).topics
        if any(t.startswith((f"{p}.", f"{p}-", f"__debezium-heartbeat.{p}")) for p in prefixes)
    ]
    for future in (kafka_admin.delete_topics(names).values() if names else []):
        future.result(timeout=30)


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_records_equal_the_connectors(outputs: Outputs, fmt: Format, stack: Endpoints) -> None:
    peer, ours = outputs.peer[fmt.name], outputs.ours[fmt.name]
    if fmt.avro:
        client = SchemaRegistryClient({"url": stack.schema_registry_url})
        peer_prefix, our_prefix = outputs.prefixes[fmt.name]
        difference = schema_difference(registered(client, peer_prefix, "P"), registered(client, our_prefix, "P"))
        assert difference is None, f"{fmt.name}, seeds {_seeds()}, registered schemas: {difference}"
        decoder = AvroDecoder(client)
        peer, ours = [decoder.record(r) for r in peer], [decoder.record(r) for r in ours]
    assert peer, f"{fmt.name}: the connector wrote nothing (seeds {_seeds()})"
    print(f"{fmt.name}: {len(peer)} records of the connector, {len(ours)} of the bridge, seeds {_seeds()}")
    for side, records in (("connector", peer), ("bridge", ours)):
        tables = _sentinel_tables(records)
        assert len(tables) == SEEDS, (
            f"{fmt.name}: the {side} read past the generation switch in {sorted(tables)} only"
            + (f"; its worker's log ends:\n{outputs.worker_log_tail(fmt.name)}" if side == "bridge" else "")
        )
    if fmt.images is not None:
        found, compared, left_out = advanced_difference(peer, ours, *outputs.prefixes[fmt.name], *fmt.images)
        print(f"{fmt.name}: {compared} keys compared, {left_out} left out (a change without its image)")
        assert compared, f"{fmt.name}: no key had every image (seeds {_seeds()})"
        assert found is None, f"{fmt.name}, {_seed_of(found)}: {found}"
        return
    difference = first_difference(peer, ours, *outputs.prefixes[fmt.name])
    assert difference is None, f"{fmt.name}, {_seed_of(difference)}: {difference}"


def test_a_changed_byte_is_found(outputs: Outputs) -> None:
    """The comparison is not blind: one byte changed in one of the connector's values fails it."""
    exact = [f.name for f in FORMATS if f.images is None and not f.avro]
    if not exact:
        pytest.skip("no JSON format compared whole was chosen (CDC_BRIDGE_TEST_PEER_FORMATS)")
    name = exact[0]
    peer = list(outputs.peer[name])
    index = next(i for i, r in enumerate(peer) if r.value)
    value = peer[index].value or b""
    at = value.index(b'"op":"') + 6
    changed = value[:at] + (b"x" if value[at : at + 1] != b"x" else b"y") + value[at + 1 :]
    peer[index] = Record(peer[index].table, peer[index].key, changed, peer[index].headers)
    difference = first_difference(peer, outputs.ours[name], *outputs.prefixes[name])
    assert difference is not None and ('"op":"x' in difference or '"op":"y' in difference), difference
    print(f"a changed byte, as a failure shows it: {name}, {_seed_of(difference)}: {difference}")
