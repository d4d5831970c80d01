"""Spark jobs throughput in local[2]: flatten (to Kafka, exactly once) and mirror (Delta MERGE), in
rows/s of input envelopes, over a random workload carried by a real `cdc-bridge run` worker; the
mirror is then compared with the Cassandra tables (the issue's 5,000-operation acceptance).

    .venv/bin/python bench/spark_bench.py [--operations 5000] [--batch 0]
    .venv/bin/python bench/spark_bench.py --flatten-backlog 1000000 [--keyspace K | --topics A,B,C] [--converter avro]
    .venv/bin/python bench/spark_bench.py --mirror-backlog 1000000 [--keyspace K | --topics A,B,C] [--converter avro]
        [--max-batches K] [--compare OTHER_DELTA_ROOT] [--mirror-args '...'] [--with-flatten]

Needs the local stack. Prints one JSON object. Session start-up (JVM, packages) is excluded from
the rates and reported apart; each job runs with --available-now semantics (`--batch N` caps the
records per micro-batch; 0: one micro-batch).
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.results import add_record_flag, record_report
from bridge_devstack.sim import Emulator
from bridge_devstack.stack.manager import StackManager
from tests.integration.worker.harness import start_worker, worker_properties, write_properties
from tests.spark import workload
from tests.spark.jobs import end_offsets, wait_settled


def run_query(start: Any) -> float:
    began = time.monotonic()
    query = start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return time.monotonic() - began


def main() -> int:
    # Spark, Ivy and the jobs' logs write to stdout too: the JSON goes to the real stdout alone.
    report = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=0, help="max records per micro-batch (0: all in one)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--flatten-backlog", type=int, metavar="CHANGES", help="instead: flatten alone, the "
                        "documented command with its defaults, over a realistic backlog of CHANGES changes "
                        "(bench/spark_flatten_backlog.py)")
    parser.add_argument("--keyspace", help="with --flatten-backlog: reuse a keyspace filled by an earlier run")
    parser.add_argument("--converter", choices=["json", "avro"], default="json",
                        help="with --flatten-backlog / --mirror-backlog: JSON with schemas or Avro")
    parser.add_argument("--flatten-args", default="", help="with --flatten-backlog: flags added to the documented "
                        "command, for tuning experiments (e.g. '--min-partitions 0')")
    parser.add_argument("--mirror-backlog", type=int, metavar="CHANGES", help="instead: the mirror alone, the "
                        "documented command with its defaults, over a realistic backlog of CHANGES changes "
                        "(bench/spark_mirror_backlog.py)")
    parser.add_argument("--topics", help="with --mirror-backlog or --flatten-backlog: reuse the topics of an earlier "
                        "run (as the mirror's report lists them) instead of filling and carrying a backlog")
    parser.add_argument("--with-flatten", action="store_true", help="with --mirror-backlog: then flatten over the "
                        "same topics (--flatten-backlog's run), and the mirror's rows/s over flatten's "
                        "(mirror_flatten_ratio)")
    parser.add_argument("--max-batches", type=int, help="with --mirror-backlog: stop after this many micro-batches")
    parser.add_argument("--compare", metavar="DELTA_ROOT", help="with --mirror-backlog: compare the mirror's tables "
                        "with another run's over the same topics")
    parser.add_argument("--mirror-args", default="", help="with --mirror-backlog: flags added to the documented "
                        "command (e.g. '--max-offsets-per-trigger 100000')")
    parser.add_argument("--master", help="with --flatten-backlog / --mirror-backlog: submit the job to this "
                        "standalone master (cdc-bridge stack up --spark-cluster) with spark-submit")
    add_record_flag(parser)
    parser.add_argument("--cores-max", type=int, default=2, help="with --master: the job's cores (spark.cores.max)")
    args = parser.parse_args()
    endpoints = StackManager.default().endpoints
    if args.master:
        from spark_flatten_backlog import use_cluster

        use_cluster(args.master, args.cores_max)
    if args.mirror_backlog or (args.topics and not args.flatten_backlog):
        from spark_flatten_backlog import flatten_backlog
        from spark_mirror_backlog import mirror_backlog

        mirrored = mirror_backlog(endpoints, args.mirror_backlog or 0, args.keyspace, args.topics,
                                  args.mirror_args.split(), args.max_batches, args.compare, args.converter)
        avro = "_avro" if args.converter == "avro" else ""
        picks = {f"spark_mirror_rows_per_s{avro}": "rows_per_s_overall",
                 "spark_mirror_batch_overhead_s": "overhead.one_record_batch_s",
                 "spark_mirror_first_batch_s": "overhead.first_record_batch_s",
                 "spark_peak_driver_rss_mb": "jvm_peak_rss_mb"}
        if args.with_flatten:
            flattened = flatten_backlog(endpoints, args.mirror_backlog or 0, None, args.converter,
                                        args.flatten_args.split(), topics_from=mirrored["topics"])
            mirrored["flatten_same_topics"] = flattened
            if mirrored.get("rows_per_s_overall") and flattened.get("rows_per_s_overall"):
                mirrored["mirror_flatten_ratio"] = round(mirrored["rows_per_s_overall"]
                                                         / flattened["rows_per_s_overall"], 2)
            picks[f"spark_mirror_flatten_ratio{avro}"] = "mirror_flatten_ratio"
        print(json.dumps(mirrored), file=report, flush=True)
        if args.record:
            record_report(mirrored, picks, bench="spark_mirror_backlog")
            if args.with_flatten and not avro:
                _record_flatten(mirrored["flatten_same_topics"])
        return 0
    if args.flatten_backlog:
        from spark_flatten_backlog import flatten_backlog

        flattened = flatten_backlog(endpoints, args.flatten_backlog, args.keyspace, args.converter,
                                    args.flatten_args.split(), args.topics.split(",") if args.topics else None)
        print(json.dumps(flattened), file=report, flush=True)
        if args.record:
            _record_flatten(flattened)
        return 0
    folder = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    name = f"bench-{uuid.uuid4().hex[:8]}"
    keyspace = f"ks_bench_{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {"operations": args.operations, "master": "local[2]",
                              "load_average": os.getloadavg()}
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        emu.session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                            "'replication_factor': 1}")
        try:
            tables = workload.create_tables(emu, keyspace)
            config = write_properties(folder / "worker.properties", worker_properties(endpoints, name, tables, **{
                "value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true",
                "dropped.changes.topic": f"{name}.dropped"}))
            worker = start_worker(config, folder, "worker")
            try:
                began = time.monotonic()
                result["kinds"] = dict(workload.run(emu, keyspace, args.operations, args.seed))
                result["workload_s"] = round(time.monotonic() - began, 1)
                topics = [f"{name}.{t}" for t in tables] + [f"{name}.dropped"]
                wait_settled(endpoints.kafka_bootstrap, topics, timeout_s=600)
            finally:
                worker.kill()
            records = sum(end_offsets(endpoints.kafka_bootstrap, topics).values())  # incl. txn markers
            result.update(_spark(endpoints, folder, name, topics, keyspace, args, emu))
            result["input_offsets"] = records
        finally:
            emu.session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    print(json.dumps(result), file=report, flush=True)
    if args.record:
        record_report(result, {"spark.flatten_rows_per_s": "flatten_rows_per_s",
                               "spark.mirror_rows_per_s": "mirror_rows_per_s"}, bench="spark_bench")
    return 0


def _record_flatten(flattened: dict[str, Any]) -> None:
    record_report(flattened, {"spark_flatten_rows_per_s": "rows_per_s_overall",
                              "spark_flatten_batch_overhead_s": "overhead.one_record_batch_s"},
                  bench="spark_flatten_backlog")


def _spark(endpoints: Any, folder: Path, name: str, topics: list[str], keyspace: str, args: argparse.Namespace,
           emu: Emulator) -> dict[str, Any]:
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.core.session import build_session
    from bridge.spark.core.smt_options import SmtOptions
    from bridge.spark.jobs import RunOptions, SourceOptions, start_flatten, start_mirror

    began = time.monotonic()
    spark = build_session("local[2]", app_name="cdc-bridge-bench")
    out: dict[str, Any] = {"session_start_s": round(time.monotonic() - began, 1)}
    source = SourceOptions(bootstrap_servers=endpoints.kafka_bootstrap, topics=tuple(topics),
                           value_format=ValueFormat.JSON_SCHEMAS, max_offsets_per_trigger=args.batch)
    rows = spark.read.format("kafka").option("kafka.bootstrap.servers", endpoints.kafka_bootstrap) \
        .option("subscribe", ",".join(topics)).option("kafka.isolation.level", "read_committed").load().count()
    out["input_records"] = rows
    smt = SmtOptions.from_properties({"delete.tombstone.handling.mode": "rewrite", "add.fields": "op,source.ts_ms"})
    flatten_s = run_query(lambda: start_flatten(
        spark, source, smt, RunOptions(str(folder / "ckpt-flatten"), name=f"{name}-flatten", available_now=True),
        topic_rule="{topic}.flat", delta_root=None))
    out["flatten_s"] = round(flatten_s, 1)
    out["flatten_rows_per_s"] = round(rows / flatten_s)
    mirror_s = run_query(lambda: start_mirror(
        spark, source, RunOptions(str(folder / "ckpt-mirror"), name=f"{name}-mirror", available_now=True),
        delta_root=str(folder / "mirror")))
    out["mirror_s"] = round(mirror_s, 1)
    out["mirror_rows_per_s"] = round(rows / mirror_s)
    diffs = {}
    for table in workload.TABLES:
        base = workload.base_rows(emu.session, keyspace, table)
        mirror = workload.mirror_rows(spark, str(folder / "mirror" / keyspace / table), table)
        diffs[table] = {"base_rows": len(base), "mirror_rows": len(mirror),
                        "differences": workload.differences(base, mirror, limit=3)}
    out["mirror_check"] = diffs
    spark.stop()
    return out


if __name__ == "__main__":
    sys.exit(main())
