"""CPU per envelope of each stage of the worker's path, one thread, over a filled backlog.

The worker runs these stages on three threads (the driver's event loop, the reader's scheduler,
the main loop) and adds producing; this runs them one after the other in one thread, so each
stage's process CPU time is its own: what a faster stage would save, and the floor of a
one-process pipeline without Kafka.

- `page`: the driver pages every stream's log rows (the reader's page size, tuple rows);
- `decode`: `RowDecoder` + `RecordAssembler`, rows to `ChangeRecord`s;
- `translate`: `Translator.translate`, records to envelopes (pre-images on, as the catch-up);
- `serialize`: JSON key and value of every record.

    .venv/bin/python bench/stage_costs.py --keyspace bench_backlog_realistic_200000
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any

from cassandra.cluster import ExecutionProfile
from cassandra.query import SimpleStatement, tuple_factory

from bridge.envelope.serializers import build_record_serializer
from bridge.envelope.settings import EnvelopeSettings
from bridge.envelope.translator import Translator
from bridge.scylla.pages import RowDecoder
from bridge.scylla.records import RecordAssembler
from bridge.scylla.session import connect
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.stream_id import StreamId
from bridge.scylla.table_schema import load_table_schema
from bridge.stack.layout import Endpoints
from bridge.worker import tuning as runtime_tuning

STAGES = ("page", "decode", "translate", "serialize")


def stage_costs(host: str, port: int, keyspace: str, tables: list[str]) -> dict[str, Any]:
    cluster, session = connect([(host, port)])  # as the worker connects (protocol, decoders)
    cluster.add_execution_profile("rows", ExecutionProfile(row_factory=tuple_factory))  # as the reader's
    try:
        settings = EnvelopeSettings(topic_prefix="stages", experimental_preimages_enabled=True)
        serializer = build_record_serializer(settings)
        translator = Translator(settings, on_new_plan=serializer.prepare)
        seconds = dict.fromkeys(STAGES, 0.0)
        rows = envelopes = 0
        runtime_tuning.tune_for_streaming()
        for table in tables:
            schema = load_table_schema(session, keyspace, table)
            log = f'"{keyspace}"."{table}_scylla_cdc_log"'
            statement = SimpleStatement(f'SELECT * FROM {log} WHERE "cdc$stream_id" = %s',
                                        fetch_size=ReaderSettings().page_size)
            for (raw,) in session.execute(f'SELECT DISTINCT "cdc$stream_id" FROM {log}', execution_profile="rows"):
                started = time.process_time()
                result = session.execute(statement, (raw,), execution_profile="rows")
                pages = [result.current_rows]
                while result.has_more_pages:
                    result.fetch_next_page()
                    pages.append(result.current_rows)
                decoding = time.process_time()
                decoder, assembler = RowDecoder(table, result.column_names), RecordAssembler(keyspace, table)
                stream = StreamId(bytes(raw))
                records = [record for page in pages for record in assembler.add(decoder.decode_page(page, stream))]
                translating = time.process_time()
                translations = [translator.translate(record, schema) for record in records]
                serializing = time.process_time()
                for translation in translations:
                    for kafka_record in translation.records:
                        serializer.serialize(kafka_record)
                        envelopes += 1
                done = time.process_time()
                rows += sum(len(page) for page in pages)
                for stage, (start, end) in zip(STAGES, [(started, decoding), (decoding, translating),
                                                        (translating, serializing), (serializing, done)],
                                               strict=True):
                    seconds[stage] += end - start
    finally:
        cluster.shutdown()
        gc.collect()
    total = sum(seconds.values())
    return {
        "keyspace": keyspace, "log_rows": rows, "envelopes": envelopes,
        "us_per_envelope": {stage: round(1e6 * s / envelopes, 2) for stage, s in seconds.items()},
        "one_thread_envelopes_per_cpu_s": round(envelopes / total),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keyspace", required=True, help="a backlog keyspace filled by python -m bench")
    parser.add_argument("--tables", default="wide,imaged")
    parser.add_argument("--record", action="store_true", help="merge the stage_costs_* keys into bench/results.json")
    args = parser.parse_args()
    endpoints = Endpoints.from_env()
    report = stage_costs(endpoints.cassandra_host, endpoints.cassandra_port, args.keyspace, args.tables.split(","))
    json.dump(report, sys.stdout, indent=2)
    print()
    if args.record:
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.results import record_report

        record_report(report, {"stage_costs_us_per_envelope.": "us_per_envelope.",
                               "stage_costs_one_thread_envelopes_per_cpu_s": "one_thread_envelopes_per_cpu_s"},
                      bench="stage_costs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
