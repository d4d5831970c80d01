"""CPU per row of each stage of a snapshot's path, one thread, page by page, over the table
`bench/snapshot_bench.py` fills.

The worker runs these stages on three threads (the driver's event loop, the reader's scheduler,
the main loop) and then produces; this runs them one after the other in one thread on each page
of `snapshot.fetch.size` rows (what the worker holds at a time), so each stage's process CPU
time is its own and the sum is the floor of a one-process snapshot before any Kafka work:

- `page`: the driver pages the snapshot's query (tuple rows, a session made as the worker's);
- `decode`: `SnapshotDecoder.decode`, result rows to `ScannedRow`s;
- `rows`: `snapshot_rows`, the rows to hand on with their times;
- `translate`: `Translator.translate_snapshot`, rows to `op=r` envelopes;
- `serialize`: JSON key and value of every record (schemas off, as the benchmark's worker).

    .venv/bin/python bench/snapshot_stage_costs.py [--keyspace bench_snapshot_1000000] [--rows 200000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from cassandra.cluster import ExecutionProfile
from cassandra.query import tuple_factory

from bridge.envelope.serializers import build_record_serializer
from bridge.envelope.settings import EnvelopeSettings
from bridge.envelope.translator import Translator
from bridge.scylla.groups import TOKEN_MAX
from bridge.scylla.session import connect
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.snapshot_pages import SnapshotDecoder
from bridge.scylla.snapshot_scan import snapshot_rows
from bridge.scylla.table_schema import load_table_schema
from bridge.worker import tuning as runtime_tuning
from bridge_devstack.stack.layout import Endpoints

STAGES = ("page", "decode", "rows", "translate", "serialize")


def stage_costs(host: str, port: int, keyspace: str, table: str, most_rows: int) -> dict[str, Any]:
    cluster, session = connect([(host, port)])  # as the worker connects (protocol, decoders)
    cluster.add_execution_profile("rows", ExecutionProfile(row_factory=tuple_factory))
    try:
        schema = load_table_schema(session, keyspace, table)
        decoder = SnapshotDecoder(schema)
        statement = session.prepare(decoder.first_range_query)
        statement.fetch_size = ReaderSettings().snapshot_fetch_size
        settings = EnvelopeSettings(topic_prefix="stages", key_converter_schemas_enable=False,
                                    value_converter_schemas_enable=False)
        serializer = build_record_serializer(settings)
        translator = Translator(settings, on_new_plan=serializer.prepare)
        runtime_tuning.tune_for_streaming()
        seconds = dict.fromkeys(STAGES, 0.0)
        rows = 0
        started = time.process_time()
        result = session.execute(statement, (TOKEN_MAX,), execution_profile="rows")
        while True:
            page = result.current_rows
            marks = [started, time.process_time()]
            scanned = [(decoder.decode(row), 0) for row in page]
            marks.append(time.process_time())
            handed_on = snapshot_rows(scanned, 0)
            marks.append(time.process_time())
            translation = translator.translate_snapshot(handed_on, "true", schema)
            marks.append(time.process_time())
            for record in translation.records:
                serializer.serialize(record)
            marks.append(time.process_time())
            for stage, start, end in zip(STAGES, marks[:-1], marks[1:], strict=True):
                seconds[stage] += end - start
            rows += len(page)
            del page, scanned, handed_on, translation  # as the worker: a page at a time
            if rows >= most_rows or not result.has_more_pages:
                break
            started = time.process_time()
            result.fetch_next_page()
    finally:
        cluster.shutdown()
    total = sum(seconds.values())
    return {"keyspace": keyspace, "table": table, "rows": rows,
            "us_per_row": {stage: round(1e6 * s / rows, 2) for stage, s in seconds.items()},
            "one_thread_rows_per_cpu_s": round(rows / total)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keyspace", default="bench_snapshot_1000000", help="filled by bench/snapshot_bench.py")
    parser.add_argument("--table", default="snap")
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    endpoints = Endpoints.from_env()
    report = stage_costs(endpoints.cassandra_host, endpoints.cassandra_port, args.keyspace, args.table, args.rows)
    json.dump(report, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
