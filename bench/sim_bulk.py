"""Benchmark: how fast the emulator fills a CDC log table (bulk mode), and the paced mixed load.

Prints one JSON object. Needs the local stack (`cdc-bridge stack up`). Usage:

    .venv/bin/python bench/sim_bulk.py [--changes 20000] [--concurrency 128] [--no-base]
        [--mixed-seconds 10] [--mixed-workers 4]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from bridge_devstack.sim import Emulator
from bridge_devstack.sim.load import LoadGenerator, LoadSpec, bulk_fill


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--no-base", action="store_true", help="write log rows only, no base rows")
    parser.add_argument("--mixed-seconds", type=float, default=10.0, help="0 skips the mixed-load run")
    parser.add_argument("--mixed-rate", type=float, default=10_000.0)
    parser.add_argument("--mixed-workers", type=int, default=4)
    args = parser.parse_args()
    keyspace = f"bench_sim_{uuid.uuid4().hex[:8]}"
    with Emulator.connect() as emu:
        emu.execute(
            f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        )
        try:
            started = time.monotonic()
            bulk = bulk_fill(emu, keyspace, "bulk", args.changes, concurrency=args.concurrency, base=not args.no_base)
            stored = emu.session.execute(f"SELECT count(*) FROM {keyspace}.bulk_scylla_cdc_log", timeout=120).one()[0]
            result = {
                "benchmark": "sim_bulk",
                "bulk": {**bulk.as_dict(), "log_rows_stored": stored, "base_writes": not args.no_base},
                "concurrency": args.concurrency,
                "wall_s": round(time.monotonic() - started, 3),
            }
            if args.mixed_seconds > 0:
                spec = LoadSpec(
                    keyspace, rate=args.mixed_rate, duration_s=args.mixed_seconds, seed=1, workers=args.mixed_workers
                )
                generator = LoadGenerator(emu, spec)
                generator.prepare()
                result["mixed"] = {
                    **generator.run().as_dict(),
                    "target_rate": args.mixed_rate,
                    "workers": args.mixed_workers,
                    "images": True,
                }
        finally:
            emu.execute(f"DROP KEYSPACE {keyspace}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
