"""Query shape for one group's window: `"cdc$stream_id" IN (...)` versus one query per stream
(all sent at once). Measures the time to read one window of a group on the local Cassandra and
reports in which order an IN query returns the streams. Prints one JSON object.

    .venv/bin/python bench/latency_query_shape.py [--streams 2] [--rows-per-stream 200] [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from typing import Any

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args

from bridge.scylla.cdc_time import min_timeuuid, timeuuid_for
from bridge.scylla.groups import read_order
from bridge.scylla.stream_id import StreamId


def timed(fn: Any, repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
    return {"p50_ms": round(statistics.median(samples), 2), "mean_ms": round(statistics.fmean(samples), 2),
            "max_ms": round(max(samples), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=2)
    parser.add_argument("--rows-per-stream", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--page-size", type=int, default=1000)
    args = parser.parse_args()
    cluster = Cluster(["127.0.0.1"], port=9042, protocol_version=5)
    session = cluster.connect()
    keyspace = f"bench_shape_{uuid.uuid4().hex[:8]}"
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        session.execute(f'CREATE TABLE {keyspace}.log ("cdc$stream_id" blob, "cdc$time" timeuuid, '
                        '"cdc$batch_seq_no" int, v int, PRIMARY KEY ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no"))')
        streams = sorted((StreamId.build(i * 7919 - 40_000, i + 1, 5) for i in range(args.streams)), key=read_order)
        start_us = int(time.time() * 1_000_000) - 60_000_000
        insert = session.prepare(f'INSERT INTO {keyspace}.log ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no", v) '
                                 "VALUES (?, ?, 0, 1)")
        execute_concurrent_with_args(session, insert, [
            (s.raw, timeuuid_for(start_us + i * 1000)) for s in streams for i in range(args.rows_per_stream)
        ], concurrency=64)
        lower, upper = min_timeuuid(start_us), min_timeuuid(start_us + 30_000_000)
        marks = ", ".join("?" * len(streams))
        in_query = session.prepare(f'SELECT * FROM {keyspace}.log WHERE "cdc$stream_id" IN ({marks}) '
                                   'AND "cdc$time" >= ? AND "cdc$time" < ?')
        per_stream = session.prepare(f'SELECT * FROM {keyspace}.log WHERE "cdc$stream_id" = ? '
                                     'AND "cdc$time" >= ? AND "cdc$time" < ?')
        in_query.fetch_size = per_stream.fetch_size = args.page_size
        in_params = (*[s.raw for s in streams], lower, upper)

        def read_in() -> list[Any]:
            return list(session.execute(in_query, in_params))

        def read_per_stream() -> list[Any]:
            futures = [session.execute_async(per_stream, (s.raw, lower, upper)) for s in streams]
            return [row for f in futures for row in f.result()]

        order = []
        for row in read_in():
            if not order or order[-1] != row[0]:
                order.append(row[0])
        result = {
            "benchmark": "one window of one group: IN query vs one query per stream",
            "streams": args.streams,
            "rows_per_stream": args.rows_per_stream,
            "in_query": timed(read_in, args.repeat),
            "per_stream_queries": timed(read_per_stream, args.repeat),
            "in_query_returns_streams_in_unsigned_byte_order": order == sorted(order),
            "in_query_returns_streams_in_java_read_order": order == [s.raw for s in streams],
        }
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        cluster.shutdown()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
