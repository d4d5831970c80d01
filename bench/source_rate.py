"""How fast the worker's CDC source alone hands on a filled backlog: `SourceReader` (discovery,
the scheduler's windows and pages, the driver, decoding and assembling into records) polled by
a loop that only counts, with no translation and no Kafka.

Against a catch-up of the same backlog it shows how much of the worker's one interpreter the
source takes; `cores` is this process's CPU per second from the first record on.

    .venv/bin/python bench/source_rate.py --keyspace bench_backlog_realistic_200000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bridge.scylla.events import GroupDiscovered, RecordRead
from bridge.scylla.reader import SourceReader
from bridge.scylla.session import connect
from bridge.scylla.settings import ReaderSettings
from bridge.worker import tuning as runtime_tuning
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.stack.layout import Endpoints

sys.path.insert(0, str(Path(__file__).parent))
from worker_bench import lookback_ms, stored_fill


def source_rate(endpoints: Endpoints, keyspace: str, timeout_s: float) -> dict[str, Any]:
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        fill = stored_fill(emu, keyspace, 0)
    if "records" not in fill:
        raise SystemExit(f"{keyspace} has no backlog_fill report: fill it with python -m bench or worker_bench.py")
    expected = int(fill["records"])  # change records: what the reader hands on, one RecordRead each
    sim = SimSettings()
    settings = ReaderSettings(confidence_window_size_ms=2000, initial_lookback_ms=lookback_ms(fill),
                              vnodes_metadata_keyspace=sim.vnodes_keyspace,
                              tablets_metadata_keyspace=sim.tablets_keyspace)
    cluster, session = connect([(endpoints.cassandra_host, endpoints.cassandra_port)])
    runtime_tuning.tune_for_streaming()  # as the worker runs
    records = rows = 0
    first: tuple[float, float] | None = None  # (time, CPU) at the first record
    started = time.monotonic()
    try:
        with SourceReader(session, settings) as reader:
            for table in fill["tables"]:
                reader.watch_table(*table.split("."))
            while records < expected and time.monotonic() - started < timeout_s:
                for event in reader.poll(timeout_s=0.02):
                    if isinstance(event, GroupDiscovered):
                        reader.start_group(event.group.id)
                    elif isinstance(event, RecordRead):
                        first = first or (time.monotonic(), time.process_time())
                        records += 1
                        rows += len(event.record.rows)
            finished = (time.monotonic(), time.process_time())
    finally:
        cluster.shutdown()
    elapsed, cpu = (finished[0] - first[0], finished[1] - first[1]) if first else (0.0, 0.0)
    return {
        "keyspace": keyspace, "expected_records": expected, "records": records, "log_rows": rows,
        "records_per_s": round(records / elapsed) if elapsed else None,
        "log_rows_per_s": round(rows / elapsed) if elapsed else None,
        "cpu_s": round(cpu, 2), "cores": round(cpu / elapsed, 2) if elapsed else None,
        "us_cpu_per_record": round(1e6 * cpu / records, 1) if records else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keyspace", required=True, help="a keyspace filled by python -m bench or worker_bench.py")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    report = source_rate(Endpoints.from_env(), args.keyspace, args.timeout)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0 if report["records"] == report["expected_records"] else 1


if __name__ == "__main__":
    sys.exit(main())
