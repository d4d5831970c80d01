"""The whole bridge's benchmark, one command, one JSON report (issue 13):

    .venv/bin/python -m bench [--changes 1000000] [--small 200000] [--mix realistic|narrow]
        [--out bench/last-report.json]

On the running local stack (`cdc-bridge stack up`), in this order:
1. fills two backlogs with the emulator's bulk mode (log rows only), `--changes` for the main run,
   `--small` for the comparisons: `--mix realistic` (the default; `bridge.sim.backlog`: a
   ten-column table of mixed types and a table with pre-images; inserts, partial updates,
   collection changes, deletes, multi-row records, a few range and partition deletes) or
   `--mix narrow` (single-row updates of (pk, ck, v int)); the catch-up waits for every Kafka
   record the bridge must produce for the backlog (computed from what was written: deletes add a
   tombstone, range and clustered partition deletes are dropped);
2. catch-up, one worker, JSON, exactly-once, from empty offsets, on the main backlog: envelopes/s,
   envelopes per worker CPU-second (whole run, and steady: from the first envelope on), RSS when a
   quarter, half and all of the backlog was read, peak RSS;
3. the ceilings on the same servers: paging the same log rows (every log table of the backlog)
   through the driver with no processing, and producing records like the bridge's (sampled from
   its topics in proportion to what each got) with the worker's
   transactional producer; `throughput_ratio` = bridge / min(ceilings);
4. on the small backlog: JSON with one worker, JSON with two, Avro with one (the registry of the
   stack); Kafka and Cassandra share the machine's cores, so two workers show overhead, not speed-up;
5. latency: 2,000 changes/s for 60 s, 2 s confidence window: p50/p99/max beyond the window;
6. serialization alone (bench/envelope_bench.py) and Spark (bench/spark_bench.py when present);
7. where the time goes: CPU per envelope of each stage, one thread, on the small backlog
   (bench/stage_costs.py), and the cores each process used during the main catch-up.

Shared machines are noisy: compare figures within one report; CPU-second figures move least.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from bench.ceilings import bridge_session, paging_ceiling, producing_ceiling
from bench.results import add_record_flag, record_report
from bench.worker_bench import catchup, fill_backlog, latency, stored_fill
from bridge.sim import Emulator
from bridge.stack.layout import Endpoints

HERE = Path(__file__).parent


def fill(endpoints: Endpoints, changes: int, mix: str, reuse: bool,
         keyspace: str | None = None) -> tuple[str, dict[str, Any]]:
    """A backlog keyspace named after its mix and size. With `reuse`, one that an earlier run
    filled completely (its `backlog_fill` report is written last) is read again: every run
    starts its workers from empty offsets under a new connector name, so a backlog can be read
    any number of times, and filling 1M changes takes longer than the rest of the benchmark."""
    keyspace = keyspace or f"bench_backlog_{mix}_{changes}"
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        if reuse and emu.catalog.table_exists(keyspace, "backlog_fill"):
            report = {**stored_fill(emu, keyspace, changes), "reused": True}
            print(f"reusing {keyspace} ({mix}): {report['envelopes']} envelopes expected", file=sys.stderr)
            return keyspace, report
        emu.session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=300)
        report = fill_backlog(emu, keyspace, changes, mix)
    print(f"filled {keyspace} ({mix}): {report['changes']} changes, {report['envelopes']} envelopes expected, "
          f"in {report['elapsed_s']:.0f} s", file=sys.stderr)
    return keyspace, report


def sample_topics(endpoints: Endpoints, shares: dict[str, int],
                  count: int = 1000) -> list[tuple[bytes | None, bytes | None]]:
    """`count` records the bridge produced, from each topic in proportion to `shares` (the
    records each topic got), interleaved."""
    total = sum(shares.values()) or 1
    per_topic = []
    for topic, share in shares.items():
        wanted = max(1, round(count * share / total)) if share else 0
        consumer = Consumer({"bootstrap.servers": endpoints.kafka_bootstrap,
                             "group.id": f"bench-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed"})
        consumer.subscribe([topic])
        samples: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 60
        while len(samples) < wanted and time.monotonic() < deadline:
            samples += [(m.key(), m.value()) for m in consumer.consume(wanted, timeout=1) if m.error() is None]
        consumer.close()
        per_topic.append(samples[:wanted])
    return [sample for group in itertools.zip_longest(*per_topic) for sample in group if sample is not None]


def run_json_script(script: Path, *args: str) -> dict[str, Any] | None:
    if not script.exists():
        return None
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout))


def catchup_run(endpoints: Endpoints, keyspace: str, changes: int, converter: str = "json",
                workers: int = 1, processes: int = 1) -> dict[str, Any]:
    args = argparse.Namespace(changes=changes, converter=converter, workers=workers, keyspace=keyspace,
                              timeout=1800.0, profile=None, profile_gil=False, processes=processes)
    result = catchup(args, endpoints)
    print(f"catch-up {converter} x{workers} ({processes} processes each): {result['envelopes_per_s']} envelopes/s "
          f"({result['received']} of {result['expected']})", file=sys.stderr)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=200_000)
    parser.add_argument("--mix", choices=["realistic", "narrow"], default="realistic",
                        help="the backlogs' changes (bench/README.md)")
    parser.add_argument("--latency-rate", type=float, default=2000)
    parser.add_argument("--latency-seconds", type=float, default=60)
    parser.add_argument("--out", type=Path, default=HERE / "last-report.json")
    parser.add_argument("--fresh", action="store_true",
                        help="fill new backlogs even if an earlier run left complete ones "
                             "(keyspaces bench_backlog_<mix>_<changes>)")
    add_record_flag(parser)
    parser.add_argument("--keyspaces", help="BIG,SMALL: the backlog keyspaces to read (filled if incomplete)")
    args = parser.parse_args()
    endpoints = Endpoints.from_env()
    started, load_at_start = time.monotonic(), round(os.getloadavg()[0], 2)
    named = args.keyspaces.split(",") if args.keyspaces else [None, None]
    big, big_fill = fill(endpoints, args.changes, args.mix, not args.fresh, named[0])
    small, _ = fill(endpoints, args.small, args.mix, not args.fresh, named[1])
    main_run = catchup_run(endpoints, big, args.changes)
    with bridge_session(endpoints.cassandra_host, endpoints.cassandra_port) as session:
        paging = paging_ceiling(session, main_run["tables"])
    by_table = big_fill.get("envelopes_by_table") or {table.split(".", 1)[1]: big_fill["envelopes"]
                                                      for table in main_run["tables"]}
    shares = {topic: by_table.get(topic.rsplit(".", 1)[1], 0) for topic in main_run["topics"]}
    producing = producing_ceiling(endpoints.kafka_bootstrap, sample_topics(endpoints, shares), main_run["expected"])
    ceiling = min(paging["rows_per_s"], producing["records_per_s"])
    small_runs = {"json_1_worker": catchup_run(endpoints, small, args.small),
                  "json_2_workers": catchup_run(endpoints, small, args.small, workers=2),
                  "json_1_worker_2_processes": catchup_run(endpoints, small, args.small, processes=2),
                  "avro_1_worker": catchup_run(endpoints, small, args.small, converter="avro")}
    steady = latency(argparse.Namespace(rate=args.latency_rate, seconds=args.latency_seconds, confidence_ms=2000),
                     endpoints)
    serialization = run_json_script(HERE / "envelope_bench.py", "--records", "50000")
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_1m_at_start_and_end": [load_at_start, round(os.getloadavg()[0], 2)]},
        "mix": args.mix,
        "changes": big_fill["changes"],
        "envelopes": main_run["expected"],
        "fill_changes_per_s": round(big_fill["changes"] / big_fill["elapsed_s"]) if big_fill.get("elapsed_s") else None,
        "backlog_reused": bool(big_fill.get("reused")),
        "envelopes_per_s": main_run["envelopes_per_s"],
        "steady_envelopes_per_s": main_run.get("steady_envelopes_per_s"),
        "envelopes_per_cpu_s": main_run["envelopes_per_cpu_s"],
        "steady_envelopes_per_cpu_s": main_run.get("steady_envelopes_per_cpu_s"),
        "ceilings": {"driver_paging_rows_per_s": paging["rows_per_s"],
                     "kafka_producing_records_per_s": producing["records_per_s"]},
        "throughput_ratio": round(main_run["envelopes_per_s"] / ceiling, 3),
        "steady_throughput_ratio": round((main_run.get("steady_envelopes_per_s") or 0) / ceiling, 3),
        "latency_overhead_p50_s": (steady["delay_beyond_confidence_ms"] or {}).get("p50", 0) / 1000,
        "latency_overhead_p99_s": (steady["delay_beyond_confidence_ms"] or {}).get("p99", 0) / 1000,
        "latency_overhead_max_s": (steady["delay_beyond_confidence_ms"] or {}).get("max", 0) / 1000,
        "cores_used_during_catchup": main_run.get("cores_used"),
        "peak_rss_mb": main_run["peak_rss_mb"],
        "rss_mb_at_backlog_read": main_run.get("rss_mb_at_backlog_read"),
        **one_core_rates(serialization),
        "details": {"catchup": main_run, "paging_ceiling": paging, "producing_ceiling": producing,
                    "small_backlog": small_runs, "latency": steady,
                    "serialization": serialization,
                    "spark": run_json_script(HERE / "spark_bench.py"),
                    "stage_costs": run_json_script(HERE / "stage_costs.py", "--keyspace", small)},
        "elapsed_s": round(time.monotonic() - started),
    }
    text = json.dumps(report, indent=2)
    args.out.write_text(text + "\n")
    print(text)
    if args.record:
        small = {f"small_backlog_200k.{run}.{key}": f"details.small_backlog.{run}.{key}" for run in small_runs
                 for key in ("envelopes_per_s", "steady_envelopes_per_s", "envelopes_per_cpu_s",
                             "steady_envelopes_per_cpu_s")}
        record_report(report, {**{k: k for k in ("envelopes_per_s", "steady_envelopes_per_s", "envelopes_per_cpu_s",
                  "steady_envelopes_per_cpu_s", "throughput_ratio", "steady_throughput_ratio", "latency_overhead_p50_s",
                  "latency_overhead_p99_s", "latency_overhead_max_s", "peak_rss_mb", *one_core_rates(None))},
                               "ceilings.": "ceilings.",
                               "cores_used_during_catchup.": "cores_used_during_catchup.",
                               "rss_mb_at_backlog_read.": "rss_mb_at_backlog_read.", **small}, bench="worker")
    return 0


def one_core_rates(serialization: dict[str, Any] | None) -> dict[str, int | None]:
    """Translate + serialize per core (bench/envelope_bench.py), legacy and advanced (issue 25):
    legacy of the delta row alone and of the same log records the advanced format reads (each
    change with its post-image), advanced with `cdc.include.after=full`."""
    rates = (serialization or {}).get("records_per_second", {})
    return {
        "json_envelopes_per_s_1core": rates.get("translate_json_schemas_off"),
        "avro_envelopes_per_s_1core": rates.get("translate_avro"),
        "legacy_post_imaged_json_envelopes_per_s_1core": rates.get("legacy_post_imaged_translate_json_schemas_off"),
        "legacy_post_imaged_avro_envelopes_per_s_1core": rates.get("legacy_post_imaged_translate_avro"),
        "advanced_json_envelopes_per_s_1core": rates.get("advanced_translate_json_schemas_off"),
        "advanced_avro_envelopes_per_s_1core": rates.get("advanced_translate_avro"),
    }


if __name__ == "__main__":
    sys.exit(main())
