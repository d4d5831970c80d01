"""Latency of the CDC source: delay from write to record beyond the confidence window.

Writes at a steady rate (default 1000 writes/s, one record each) into a fresh keyspace on the
local stack's Cassandra: the emulator creates the table and its streams; the writes are the log
rows an UPDATE produces, inserted asynchronously in one thread (the emulator itself reaches only a
few hundred writes/s in Python, and its CPU would compete with the reader's; `--writer emulator`
uses it anyway). The source reads with a `SourceReader` (2 s confidence
window), and reports, for every record, `delivered - (write time + confidence window)`:
p50/p99/max in ms, plus the achieved write rate. Prints one JSON object.

    .venv/bin/python bench/latency_reader.py [--rate 1000] [--seconds 30] [--confidence-ms 2000]

The stack must be up (`cdc-bridge stack up`). Goal: p99 under 1000 ms at 1000 writes/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from typing import Any

from cassandra.cluster import Cluster

from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.events import GroupDiscovered, RecordRead
from bridge.scylla.reader import SourceReader
from bridge.scylla.settings import ReaderSettings
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings


def write_steadily(session: Any, settings: SimSettings, keyspace: str, rate: float, seconds: float,
                   threads: int, counts: list[int]) -> list[threading.Thread]:
    """`threads` writers, each with its own emulator, pacing themselves to rate/threads."""
    per_thread = rate / threads

    def run(index: int) -> None:
        emu = Emulator(session, settings)
        start = time.monotonic()
        n = 0
        while (elapsed := time.monotonic() - start) < seconds:
            due = n / per_thread
            if elapsed < due:
                time.sleep(due - elapsed)
            key = index * 1_000_000 + n
            emu.execute(f"UPDATE {keyspace}.t SET v = {n} WHERE pk = {key % 5000}")
            n += 1
        counts[index] = n

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    return workers


def write_log_rows_steadily(session: Any, emu: Emulator, keyspace: str, rate: float, seconds: float,
                            counts: list[int]) -> list[threading.Thread]:
    """One thread inserting one-row UPDATE records into the log table at `rate`, asynchronously."""
    streams = [s for r in emu.generation_at(int(time.time() * 1_000_000)).ranges for s in r.streams]
    insert = session.prepare(
        f'INSERT INTO {keyspace}.t_scylla_cdc_log ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no", '
        '"cdc$operation", "cdc$end_of_batch", pk, v) VALUES (?, ?, 0, 1, true, ?, ?)'
    )
    window = threading.BoundedSemaphore(128)

    def run() -> None:
        start = time.monotonic()
        n = 0
        while (elapsed := time.monotonic() - start) < seconds:
            due = n / rate
            if elapsed < due:
                time.sleep(due - elapsed)
            window.acquire()
            micros = time.time_ns() // 1000
            future = session.execute_async(insert, (streams[n % len(streams)].raw, timeuuid_for(micros), n % 5000, n))
            future.add_callbacks(lambda _: window.release(), lambda _: window.release())
            n += 1
        for _ in range(128):
            window.acquire()
        counts[0] = n

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return [worker]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="writes per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to write")
    parser.add_argument("--confidence-ms", type=int, default=2000)
    parser.add_argument("--poll-interval-ms", type=int, default=250)
    parser.add_argument("--metadata-poll-interval-ms", type=int, default=ReaderSettings().metadata_poll_interval_ms)
    parser.add_argument("--writer", choices=("direct", "emulator"), default="direct")
    parser.add_argument("--writer-threads", type=int, default=6, help="emulator writer threads")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9042)
    args = parser.parse_args()

    cluster = Cluster([args.host], port=args.port, protocol_version=5)
    session = cluster.connect()
    keyspace = f"bench_latency_{uuid.uuid4().hex[:8]}"
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    sim = SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace)
    try:
        emu = Emulator(session, sim)
        emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
        settings = ReaderSettings(
            confidence_window_size_ms=args.confidence_ms, poll_interval_ms=args.poll_interval_ms,
            vnodes_metadata_keyspace=keyspace, tablets_metadata_keyspace=keyspace, initial_lookback_ms=10_000,
            metadata_poll_interval_ms=args.metadata_poll_interval_ms,
        )
        reader = SourceReader(session, settings)
        reader.watch_table(keyspace, "t")
        counts = [0] * args.writer_threads
        began = time.monotonic()
        if args.writer == "direct":
            writers = write_log_rows_steadily(session, emu, keyspace, args.rate, args.seconds, counts)
        else:
            writers = write_steadily(session, sim, keyspace, args.rate, args.seconds, args.writer_threads, counts)
        delays_ms: list[float] = []
        confidence_us = args.confidence_ms * 1000
        deadline = time.time() + args.seconds + args.confidence_ms / 1000 + 10
        while time.time() < deadline:
            for event in reader.poll(0.05):
                now_us = time.time() * 1_000_000
                if isinstance(event, GroupDiscovered):
                    reader.start_group(event.group.id)
                elif isinstance(event, RecordRead):
                    delays_ms.append((now_us - (event.record.micros + confidence_us)) / 1000)
            if all(not w.is_alive() for w in writers) and len(delays_ms) >= sum(counts):
                break
        write_seconds = time.monotonic() - began
        reader.close()
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        cluster.shutdown()
    written = sum(counts)
    result = {
        "benchmark": "cdc source latency beyond the confidence window",
        "writer": args.writer,
        "target_rate_per_s": args.rate,
        "achieved_write_rate_per_s": round(written / min(write_seconds, args.seconds), 1),
        "seconds": args.seconds,
        "confidence_window_ms": args.confidence_ms,
        "poll_interval_ms": args.poll_interval_ms,
        "records_written": written,
        "records_read": len(delays_ms),
        "latency_ms": {
            "p50": round(statistics.median(delays_ms), 1) if delays_ms else None,
            "p99": round(percentile(delays_ms, 0.99), 1) if delays_ms else None,
            "max": round(max(delays_ms), 1) if delays_ms else None,
            "min": round(min(delays_ms), 1) if delays_ms else None,
        },
        "goal_p99_ms": 1000,
    }
    print(json.dumps(result))
    return 0 if delays_ms and len(delays_ms) == written else 1


if __name__ == "__main__":
    sys.exit(main())
