"""The Java scylla-cdc-source-connector and `cdc-bridge run` side by side on the same backlog.

    .venv/bin/python bench/peer_bench.py [--changes 200000] [--mix narrow|realistic] [--keyspace K]

Fills a backlog once (bench/worker_bench.py's fill, its stream metadata in the 18-character
keyspace the CQL proxy shows as `system_distributed`), then reads it, one run after the other on
this machine, with: the connector in Kafka Connect standalone 4.1.1 with `tasks.max=1`, the
connector with `tasks.max` = the cores, and `cdc-bridge run` (one worker process). Each side keeps
its shipped defaults but for the confidence window (2 s on both) and the lookback that reaches
the backlog; legacy JSON without schemas on both; `experimental.preimages.enabled` with the
realistic mix. Per run: records/s from start to the last record, CPU-ms per record of the side's
process tree (the Connect JVM; the bridge's process and children; the proxy, which runs in this
process, is not counted), time from start to the first record, peak RSS (sampled each 0.5 s).

Delivery guarantees differ: Connect's source tasks produce with its default at-least-once
producer (offsets flushed every `offset.flush.interval.ms`, records may repeat after a crash); the
bridge commits records and offsets in Kafka transactions (exactly once for read_committed readers).

Prints one JSON object with `peer_java_cpu_ms_per_record`, `bridge_cpu_ms_per_record`,
`peer_cpu_ratio` (connector with one task against the bridge). The machine's other load makes CPU
figures noisy: run it on an idle machine and more than once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from bridge.sim import Emulator
from bridge.sim.settings import SimSettings
from bridge.stack.connect_standalone import ConnectStandalone, connect_lib, peer_dir, peer_jar
from bridge.stack.cql_proxy import CqlRenamingProxy
from bridge.stack.layout import Endpoints, port_offset

sys.path.insert(0, str(Path(__file__).parent))
from worker_bench import fill_backlog, lookback_ms, process_tree, start_workers, stop_workers, stored_fill, tree_cpu_s

METADATA_KEYSPACE = "sim_system_distrib"  # 18 characters, shown as system_distributed by the proxy
OFFSET = port_offset(27000)


def tree_rss_mb(pid: int) -> float:
    total_kb = 0
    for member in process_tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            pass
    return total_kb / 1024


def watch(endpoints: Endpoints, topics: list[str], expected: int, pid: int, started: float,
          timeout_s: float, isolation: str) -> dict[str, Any]:
    """Consume the topics until `expected` records came: time to first and last, the process
    tree's CPU at the end and its peak RSS. Records are counted once per (topic, partition,
    offset): the connector creates its topics as its first records come, each new topic
    rebalances this uncommitted subscription, and the partitions already read start again from
    the earliest offset (counted twice, the realistic run's 280 "extra" records at eed8732)."""
    consumer = Consumer({"bootstrap.servers": endpoints.kafka_bootstrap, "group.id": f"peer-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": isolation,
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe(topics)
    seen: set[tuple[str, int, int]] = set()
    received, first_s, peak_rss, next_rss = 0, None, 0.0, 0.0
    try:
        while received < expected and time.monotonic() - started < timeout_s:
            seen.update((m.topic(), m.partition(), m.offset()) for m in consumer.consume(10_000, timeout=0.5)
                        if m.error() is None)
            received = len(seen)
            if first_s is None and received:
                first_s = time.monotonic() - started
            if time.monotonic() >= next_rss:
                peak_rss, next_rss = max(peak_rss, tree_rss_mb(pid)), time.monotonic() + 0.5
        elapsed = time.monotonic() - started
        cpu_s = tree_cpu_s(pid)
    finally:
        consumer.close()
    return {"received": received, "expected": expected, "elapsed_s": round(elapsed, 2),
            "records_per_s": round(received / elapsed) if elapsed else None,
            "cpu_s": round(cpu_s, 2), "cpu_ms_per_record": round(cpu_s * 1000 / received, 4) if received else None,
            "first_record_s": round(first_s, 2) if first_s is not None else None, "peak_rss_mb": round(peak_rss, 1)}


def run_connector(endpoints: Endpoints, jar: Path, fill: dict[str, Any], tasks: int, proxy_port: int,
                  work: Path, timeout_s: float) -> dict[str, Any]:
    prefix = f"pj{uuid.uuid4().hex[:6]}"
    connect = ConnectStandalone(jar, connect_lib(), work / prefix, endpoints.kafka_bootstrap, OFFSET + 8083)
    (work / prefix).mkdir()
    config = {
        "tasks.max": str(tasks), "topic.prefix": prefix, "scylla.table.names": ",".join(fill["tables"]),
        "scylla.cluster.ip.addresses": f"127.0.0.1:{proxy_port}",
        "scylla.confidence.window.size": "2000", "scylla.initial.lookback.ms": str(lookback_ms(fill)),
        "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    }
    if fill["mix"] == "realistic":
        config["experimental.preimages.enabled"] = "true"
    started = time.monotonic()
    connect.start()
    try:
        connect.add(prefix, config)
        assert connect.process is not None
        result = watch(endpoints, [f"{prefix}.{t}" for t in fill["tables"]], int(fill["envelopes"]),
                       connect.process.pid, started, timeout_s, "read_uncommitted")
    finally:
        connect.stop()
    return {"side": "java connector", "tasks_max": tasks, **result}


def run_bridge(endpoints: Endpoints, fill: dict[str, Any], work: Path, timeout_s: float) -> dict[str, Any]:
    name = f"pb{uuid.uuid4().hex[:6]}"
    lines = {
        "name": name, "topic.prefix": name, "scylla.table.names": ",".join(fill["tables"]),
        "scylla.cluster.ip.addresses": f"{endpoints.cassandra_host}:{endpoints.cassandra_port}",
        "scylla.confidence.window.size": "2000", "scylla.initial.lookback.ms": str(lookback_ms(fill)),
        "scylla.cdc.metadata.vnodes.keyspace": METADATA_KEYSPACE,
        "scylla.cdc.metadata.tablets.keyspace": SimSettings().tablets_keyspace,
        "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
        "kafka.bootstrap.servers": endpoints.kafka_bootstrap, "metrics.port": "0",
    }
    if fill["mix"] == "realistic":
        lines["experimental.preimages.enabled"] = "true"
    config = work / f"{name}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    started = time.monotonic()
    (process,) = start_workers(config, 1, work)
    try:
        result = watch(endpoints, [f"{name}.{t}" for t in fill["tables"]], int(fill["envelopes"]), process.pid,
                       started, timeout_s, "read_committed")
    finally:
        stop_workers([process])
    return {"side": "cdc-bridge run", "processes": 1, **result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--mix", choices=["narrow", "realistic"], default="narrow")
    parser.add_argument("--keyspace", help="reuse a backlog this script filled before")
    parser.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    parser.add_argument("--sides", default="bridge,peer1,peerN", help="runs, in order")
    parser.add_argument("--record", action="store_true", help="merge the peer_* keys into bench/results.json")
    args = parser.parse_args()
    jar = peer_jar()
    if jar is None:
        print(json.dumps({"error": f"the Java connector's jar is not in {peer_dir()} (set CDC_BRIDGE_STACK_PEER_DIR)"}))
        return 2
    endpoints = Endpoints.from_env()
    settings = SimSettings(vnodes_keyspace=METADATA_KEYSPACE, port=endpoints.cassandra_port)
    keyspace = args.keyspace or f"peerbench_{uuid.uuid4().hex[:8]}"
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port, settings=settings) as emu:
        fill = stored_fill(emu, keyspace, args.changes) if args.keyspace else fill_backlog(emu, keyspace, args.changes,
                                                                                           args.mix)
    proxy_port = OFFSET + 9042
    proxy = CqlRenamingProxy(proxy_port, endpoints.cassandra_host, endpoints.cassandra_port, METADATA_KEYSPACE)
    proxy.start()
    cores = len(os.sched_getaffinity(0))
    runs: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for side in args.sides.split(","):
                if side == "bridge":
                    runs[side] = run_bridge(endpoints, fill, Path(folder), args.timeout)
                else:
                    tasks = 1 if side == "peer1" else cores
                    runs[side] = run_connector(endpoints, jar, fill, tasks, proxy_port, Path(folder), args.timeout)
    finally:
        proxy.stop()
    peer_ms = runs.get("peer1", {}).get("cpu_ms_per_record")
    bridge_ms = runs.get("bridge", {}).get("cpu_ms_per_record")
    result = {
        "bench": "peer_side_by_side", "mix": fill["mix"], "changes": fill["changes"], "keyspace": keyspace,
        "expected_records": fill["envelopes"], "cores": cores, "runs": runs,
        "peer_java_cpu_ms_per_record": peer_ms, "bridge_cpu_ms_per_record": bridge_ms,
        "peer_cpu_ratio": round(peer_ms / bridge_ms, 1) if peer_ms and bridge_ms else None,
        "delivery": {"java connector": "at-least-once (Connect's default producer, offsets flushed periodically)",
                     "cdc-bridge run": "exactly-once (records and offsets in one Kafka transaction)"},
        "note": "one run after the other on the same machine; elapsed and first record from process start; "
                "CPU of each side's process tree; the CQL proxy the connector reads through runs in this process",
    }
    print(json.dumps(result, indent=1))
    if args.record:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.results import record_report

        keys = ("peer_java_cpu_ms_per_record", "bridge_cpu_ms_per_record", "peer_cpu_ratio")
        record_report(result, {f"{key}.{fill['mix']}": key for key in keys},
                      bench="peer_bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
