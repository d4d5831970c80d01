"""The load the freshness bench can put on this machine: its writer alone, nothing reading.

    .venv/bin/python bench/writer_ceiling.py [--rate 2000] [--duration 60] [--partitions 1000] [--record]

bench/spark_mirror_freshness.py's `Writer` (the same writes, chunks and pacing) into a fresh CDC
table of the local stack, with no worker, no Spark and no poller: the writes/s it reaches is the
ceiling of the freshness bench's load on this machine, which the worker and the mirror then share
the cores with. Prints one JSON object. Needs the local stack.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_mirror_freshness import TABLE, Writer

from bench.results import add_record_flag, command_line, record
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.load import BULK_TABLE_COLUMNS
from bridge_devstack.stack.manager import StackManager


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=2000, help="target writes per second")
    parser.add_argument("--duration", type=float, default=60, help="seconds of writing")
    parser.add_argument("--partitions", type=int, default=1000, help="as the freshness bench's")
    add_record_flag(parser)
    args = parser.parse_args()
    endpoints = StackManager.default().endpoints
    keyspace = f"writer_ceiling_{uuid.uuid4().hex[:8]}"
    emu = Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port)
    emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                "'replication_factor': 1}")
    try:
        emu.execute(f"CREATE TABLE {keyspace}.{TABLE} ({BULK_TABLE_COLUMNS}) WITH cdc = {{'enabled': true}}")
        writer = Writer(emu, keyspace, args.rate, 200, args.partitions)
        thread = threading.Thread(target=writer.run_paced, args=(args.duration,), daemon=True)
        began = time.monotonic()
        thread.start()
        time.sleep(args.duration)
        writer.stop.set()
        thread.join(60)
        if writer.error is not None:
            raise writer.error
        seconds = time.monotonic() - began
        rate = round(writer.written / seconds)
        print(json.dumps({"bench": "writer_ceiling", "rate_target": args.rate, "duration_s": round(seconds, 1),
                          "writes": writer.written, "writes_per_s": rate, "writes_landed_late": writer.late_writes,
                          "write_landing_s_max": round(writer.landing_s_max, 2)}))
        if args.record:
            record({"freshness_writer_ceiling_writes_per_s": rate}, command_line(), bench="writer_ceiling")
    finally:
        emu.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
