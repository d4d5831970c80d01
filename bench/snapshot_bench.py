"""A snapshot (`snapshot.mode=initial`) of a table written before CDC, by one worker, on the local stack.

    .venv/bin/python bench/snapshot_bench.py [--rows 1000000] [--keyspace KS] [--rate 200]
        [--profile FILE [--profile-gil]]

Fills `snap` (pk bigint, ck int, v int, t text, d double, ts timestamp; ten rows per partition)
through the driver with CDC off, then enables CDC (a keyspace named after the row count is kept
and read again by later runs; `--keyspace` names one). In the same run:

- `raw_paging_rows_per_s`: the snapshot's own query (`token(pk)`, every column, `WRITETIME` of each
  regular column) paged over the whole ring by the Python driver, `snapshot.fetch.size` rows a
  page, nothing done with the rows: the ceiling;
- `snapshot_rows_per_s`: one `cdc-bridge run` with `snapshot.mode=initial` (JSON, exactly-once)
  from its first `r` record to the last at a read_committed consumer, and `rows_per_cpu_s`;
- `peak_rss_mb` and the RSS at a quarter, half and all of the rows (flat = bounded memory);
- `streaming_delay_beyond_window_s`: a second table `t` of the same worker gets `--rate` one-row
  writes per second during the snapshot; arrival - `cdc$time` - the confidence window, p50/p99/max.

Prints one JSON object. Run on an idle machine: Kafka and Cassandra share its cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from cassandra.cluster import ExecutionProfile
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import tuple_factory

from bridge.sim import Emulator
from bridge.stack.layout import Endpoints

sys.path.insert(0, str(Path(__file__).parent))
from ceilings import bridge_session
from latency_reader import percentile, write_log_rows_steadily
from worker_bench import (
    PY_SPY,
    MachineCpu,
    arrived,
    consumer_for,
    cpu_seconds,
    properties,
    rss_mb,
    start_workers,
    stop_workers,
    thread_cpu_s,
)

CONFIDENCE_MS = 2000
ROWS_PER_PARTITION = 10


def fill(emu: Emulator, keyspace: str, rows: int) -> float | None:
    """The table and its rows (None: filled by an earlier run); rows written per second."""
    session = emu.session
    known = session.execute("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s",
                            (keyspace,)).one()
    if known is not None:
        return None
    emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    emu.execute(f"CREATE TABLE {keyspace}.snap (pk bigint, ck int, v int, t text, d double, ts timestamp, "
                "PRIMARY KEY (pk, ck))")
    insert = session.prepare(f"INSERT INTO {keyspace}.snap (pk, ck, v, t, d, ts) VALUES (?, ?, ?, ?, ?, ?)")
    started = time.monotonic()
    for first in range(0, rows, 100_000):
        batch = [(i // ROWS_PER_PARTITION, i % ROWS_PER_PARTITION, i, f"row-{i}-text", i / 7, 1_700_000_000_000 + i)
                 for i in range(first, min(rows, first + 100_000))]
        execute_concurrent_with_args(session, insert, batch, concurrency=128, raise_on_first_error=True)
        print(f"filled {first + len(batch)} of {rows}", file=sys.stderr)
    rate = rows / (time.monotonic() - started)
    emu.execute(f"ALTER TABLE {keyspace}.snap WITH cdc = {{'enabled': true}}")
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    return rate


def raw_paging(session: Any, keyspace: str, fetch_size: int) -> dict[str, Any]:
    """The snapshot's query paged by a session made as the worker makes its own."""
    columns = ["pk", "ck", "v", "t", "d", "ts"]
    query = (f"SELECT token(pk), {', '.join(columns)}, WRITETIME(v), WRITETIME(t), WRITETIME(d), WRITETIME(ts) "
             f"FROM {keyspace}.snap")
    statement = session.prepare(query)
    statement.fetch_size = fetch_size
    session.cluster.add_execution_profile("bench-raw-paging", ExecutionProfile(row_factory=tuple_factory))
    machine = MachineCpu([])
    started, rows = time.monotonic(), 0
    result = session.execute(statement, execution_profile="bench-raw-paging")
    while True:
        rows += len(result.current_rows)
        if not result.has_more_pages:
            break
        result.fetch_next_page()
    seconds = time.monotonic() - started
    return {"rows": rows, "seconds": round(seconds, 1), "rows_per_s": round(rows / seconds),
            "cores_used": machine.cores_used()}


def run_snapshot(args: argparse.Namespace, endpoints: Endpoints, emu: Emulator, rows: int) -> dict[str, Any]:
    keyspace = args.keyspace
    name = f"bench-snap-{uuid.uuid4().hex[:8]}"
    extra = {"snapshot.mode": "initial", "snapshot.fetch.size": str(args.fetch_size),
             "snapshot.max.threads": str(args.max_threads), **dict(args.settings or [])}
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "bench.properties"
        config.write_text(properties(endpoints, name, f"{keyspace}.snap,{keyspace}.t", "json", CONFIDENCE_MS,
                                     extra=extra))
        consumer = consumer_for(endpoints, [f"{name}.{keyspace}.snap", f"{name}.{keyspace}.t"])
        processes = start_workers(config, 1, Path(folder), args.profile, args.profile_gil)
        worker = processes[0]
        machine = MachineCpu([p for p in processes if p.args[0] != PY_SPY])
        counts = [0]
        writers = write_log_rows_steadily(emu.session, emu, keyspace, args.rate, args.timeout, counts)
        snapshot_rows, first, last, peak = 0, None, None, 0.0
        quarters: dict[str, float] = {}
        delays: list[float] = []
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and snapshot_rows < rows:
            for message in arrived(consumer, 5000, 0.2):
                value = message.value() if message.error() is None else None
                if value is None:
                    continue
                # A byte search, not a JSON parse, for the snapshot's records: parsing each one took
                # 0.35-0.4 of this machine's two cores from the worker and servers it measures.
                if b'"op":"r"' in value:
                    snapshot_rows += 1
                    first = first or (time.monotonic(), cpu_seconds([worker]))
                elif first is not None:
                    ts_us = json.loads(value)["source"]["ts_us"]
                    delays.append((time.time_ns() // 1000 - ts_us) / 1e6 - CONFIDENCE_MS / 1000)
            peak = max(peak, rss_mb(worker))
            for label, share in (("quarter", 0.25), ("half", 0.5), ("all", 1.0)):
                if label not in quarters and snapshot_rows >= share * rows:
                    quarters[label] = rss_mb(worker)
        last = (time.monotonic(), cpu_seconds([worker]))
        threads, cores = thread_cpu_s(worker), machine.cores_used()
        stop_workers(processes)
        consumer.close()
        for writer in writers:
            writer.join(timeout=1)
    seconds = last[0] - first[0] if first else 0.0
    return {
        "snapshot_rows": snapshot_rows,
        "snapshot_seconds": round(seconds, 1),
        "snapshot_rows_per_s": round(snapshot_rows / seconds) if seconds else None,
        "rows_per_cpu_s": round(snapshot_rows / (last[1] - first[1])) if first and last[1] > first[1] else None,
        "worker_cpu_s_by_thread": threads,
        "cores_used": cores,
        "peak_rss_mb": peak,
        "rss_mb_at_rows_read": quarters,
        "streaming_writes_per_s": args.rate,
        "streaming_delay_beyond_window_s": {
            "count": len(delays),
            "p50": round(percentile(delays, 0.5), 3), "p99": round(percentile(delays, 0.99), 3),
            "max": round(max(delays), 3)} if delays else None,
    }


def setting(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key.strip(), value.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keyspace", help="a keyspace filled by an earlier run (default: named after --rows)")
    parser.add_argument("--rate", type=float, default=200, help="writes/s to the streaming table meanwhile")
    parser.add_argument("--fetch-size", type=int, default=1000)
    parser.add_argument("--max-threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--profile", metavar="FILE", help="py-spy the worker into FILE (collapsed stacks)")
    parser.add_argument("--profile-gil", action="store_true", help="with --profile: sample only the GIL holder")
    parser.add_argument("--set", dest="settings", metavar="KEY=VALUE", type=setting, action="append")
    parser.add_argument("--record", action="store_true", help="merge the snapshot keys into bench/results.json")
    args = parser.parse_args()
    args.keyspace = args.keyspace or f"bench_snapshot_{args.rows}"
    endpoints = Endpoints.from_env()
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        fill_rate = fill(emu, args.keyspace, args.rows)
        with bridge_session(endpoints.cassandra_host, endpoints.cassandra_port) as session:
            raw = raw_paging(session, args.keyspace, args.fetch_size)
        bridge = run_snapshot(args, endpoints, emu, raw["rows"])
    ratio = None if not bridge["snapshot_rows_per_s"] else round(bridge["snapshot_rows_per_s"] / raw["rows_per_s"], 3)
    result = {"bench": "snapshot", "keyspace": args.keyspace, "rows": raw["rows"],
                      "fill_rows_per_s": None if fill_rate is None else round(fill_rate),
                      "raw_paging_rows_per_s": raw["rows_per_s"], "raw_paging_cores_used": raw["cores_used"],
                      **bridge, "ratio_to_raw_paging": ratio,
                      "fetch_size": args.fetch_size, "max_threads": args.max_threads}
    print(json.dumps(result))
    if args.record:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.results import record_report

        record_report(result, {"snapshot_rows_per_s": "snapshot_rows_per_s",
                               "snapshot_rows_per_cpu_s": "rows_per_cpu_s",
                               "raw_paging_rows_per_s": "raw_paging_rows_per_s",
                               "ratio_to_raw_paging": "ratio_to_raw_paging", "snapshot_peak_rss_mb": "peak_rss_mb",
                               "rss_mb_at_rows_read.": "rss_mb_at_rows_read.",
                               "streaming_delay_beyond_window_s.p50": "streaming_delay_beyond_window_s.p50",
                               "streaming_delay_beyond_window_s.p99": "streaming_delay_beyond_window_s.p99",
                               "streaming_delay_beyond_window_s.max": "streaming_delay_beyond_window_s.max"},
                      bench="snapshot_bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
