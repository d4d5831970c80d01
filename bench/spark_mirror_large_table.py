"""A 1-record micro-batch into a small mirror and into a mirror of millions of rows (issue 31's
`spark_mirror_large_table_batch_s`): does the table's size set the cost?

    .venv/bin/python bench/spark_mirror_large_table.py --topics W,I,D [--rows 5000000]

`W,I,D`: the topics of an earlier `bench/spark_bench.py --mirror-backlog` run (its report lists
them). Steps, each with the documented `cdc-bridge spark mirror` command:
1. the small mirror: the last `--tail` records of the `wide` topic, `--available-now` (its
   end-of-run compaction writes the table: about 10,000 rows);
2. `--batches` micro-batches of one change each into it (records of the topic from before the
   small mirror's, sent again one at a time, the next once the last is mirrored, continuously
   triggered; the median of those after the first, which creates the changelog's table), with the
   defaults (the micro-batch appends to the changelog) and with `--compact-every-batches 1` (each
   one also compacts: a MERGE into the table, what one micro-batch in ten pays by default; other
   changes than the first mode's);
3. the large mirror: a copy of the small one grown to `--rows` rows by appending its rows again
   with their first key column in the table's (alphabetical) order shifted (an integer by a
   multiple of its range, text with a suffix: new keys, real value columns and bookkeeping), in
   files of about 1M rows; on the bench's `wide` table that column is `ck`, a clustering column,
   so the copies are new rows of the same 9,994 partitions, not new partitions;
4. the same micro-batches into it.
`--cluster`: both tables clustered by their key columns first (`ALTER TABLE ... CLUSTER BY`, then
`OPTIMIZE`, timed), as docs/spark.md ("Table layout") shows a user; `--modes compact_each`: only
the compacting micro-batches. The compacting mode runs first: its compactions' idempotent-write
marker (the last batch id folded) would otherwise follow the appending mode's pending changes,
whose batch ids are higher than its own, and its later MERGEs would commit nothing.
Prints one JSON object with both medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition
from spark_flatten_backlog import CLI
from spark_flatten_backlog import _events as events_of
from spark_flatten_backlog import _run as run_cli
from spark_mirror_backlog import backlog

from bridge_devstack.stack.manager import StackManager
from tests.spark.jobs import end_offsets


def small_mirror(endpoints: Any, config: Path, topics: list[str], folder: Path, tail: int) -> dict[str, Any]:
    """The mirror of the `wide` topic's last `tail` records (the dropped-changes topic, which the
    config names, from its end: Spark wants every partition of specific starting offsets)."""
    wide_topic = next(t for t in topics if t.endswith(".wide"))
    end = end_offsets(endpoints.kafka_bootstrap, [wide_topic, *[t for t in topics if t.endswith(".dropped")]])
    starting: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in end.items():
        starting.setdefault(topic, {})[str(partition)] = max(0, offset - tail) if topic == wide_topic else -1
    log = folder / "small.log"
    run = run_cli(["--config", str(config), "--topics", wide_topic, "--checkpoint", str(folder / "checkpoint-small"),
                   "--delta", str(folder / "small"), "--starting-offsets", json.dumps(starting),
                   "--available-now"], log)
    compacted = [e for e in events_of(log) if e.get("event") == "mirror compacted"]
    return {**run, "wide_from": min(starting[wide_topic].values()),
            "compactions": [{"table": e["table"], "rows_changed": e["rows_changed"], "s": e["seconds"]}
                            for e in compacted]}


def grow(small: Path, large: Path, rows: int) -> dict[str, Any]:
    """Copy the small mirror's table and append its rows with shifted keys until it holds `rows`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from bridge.spark.core.session import build_session

    shutil.copytree(small, large)
    spark = build_session("local[2]", app_name="cdc-bridge-bench-grow")
    try:
        table = spark.read.format("delta").load(str(large))
        keys = [f.name for f in table.schema.fields if (f.metadata or {}).get("cdc.role") == "key"]
        have = table.count()
        copies = max(0, -(-(rows - have) // have))
        began = time.monotonic()
        factor = spark.range(1, copies + 1).withColumnRenamed("id", "_copy")

        first = keys[0]  # the first key column (the table's order: not necessarily the partition key)
        data_type = table.schema[first].dataType
        if isinstance(data_type, (T.IntegerType, T.LongType)):
            low, high = table.agg(F.min(first), F.max(first)).first()
            moved = (F.col(first) + F.col("_copy") * (high - low + 1)).cast(data_type)
        elif isinstance(data_type, T.StringType):
            moved = F.concat(F.col(first), F.lit("-"), F.col("_copy").cast("string"))
        else:
            raise SystemExit(f"key column {first} of type {data_type.simpleString()}: no way to shift it")

        grown = table.crossJoin(factor).select(*[moved.alias(c) if c == first else F.col(c) for c in table.columns])
        grown = grown.limit(rows - have).repartition(max(1, (rows - have) // 1_000_000))
        grown.write.format("delta").mode("append").save(str(large))
        total = spark.read.format("delta").load(str(large)).count()
        return {"rows": total, "key_columns": keys, "template_rows": have, "grow_s": round(time.monotonic() - began, 1)}
    finally:
        spark.stop()


def cluster(table: Path) -> dict[str, Any]:
    """Cluster the table by its key columns (liquid clustering, then OPTIMIZE): seconds and files."""
    from bridge.spark.core.session import build_session

    spark = build_session("local[2]", app_name="cdc-bridge-bench-cluster")
    try:
        frame = spark.read.format("delta").load(str(table))
        keys = [f.name for f in frame.schema.fields if (f.metadata or {}).get("cdc.role") == "key"]
        began = time.monotonic()
        spark.sql(f"ALTER TABLE delta.`{table}` CLUSTER BY ({', '.join(f'`{k}`' for k in keys)})")
        row = spark.sql(f"OPTIMIZE delta.`{table}`").first()
        metrics = row["metrics"].asDict() if row is not None else {}
        return {"cluster_s": round(time.monotonic() - began, 1), "files_removed": metrics.get("numFilesRemoved"),
                "files_added": metrics.get("numFilesAdded"), "load_average": os.getloadavg()}
    finally:
        spark.stop()


def changes_before(endpoints: Any, topic: str, offset: int, count: int) -> list[Any]:
    """`count` records with a value, read from `offset` on: changes older than the small mirror's
    (it holds the records after them), each touching a row of the table or a new one."""
    consumer = Consumer({"bootstrap.servers": endpoints.kafka_bootstrap, "group.id": f"b-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, offset)])
    found: list[Any] = []
    try:
        while len(found) < count:
            message = consumer.poll(10)
            if message is not None and message.error() is None and message.value() is not None:
                found.append(message)
        return found
    finally:
        consumer.close()


def one_record_batches(endpoints: Any, documented: list[str], topic: str, work: Path,
                       changes: list[Any]) -> dict[str, Any]:
    """A micro-batch per change (the next sent once the last is mirrored), continuously triggered;
    the seconds of each micro-batch that appended one."""
    producer = Producer({"bootstrap.servers": endpoints.kafka_bootstrap})
    log = work / "batches.log"
    sent = 0

    def mirrored() -> list[dict[str, Any]]:
        return [e for e in events_of(log) if e.get("event") == "micro-batch mirrored"]

    def feed() -> bool:
        nonlocal sent
        events = events_of(log)
        # Sent once the first micro-batch is done: it fixes where `latest` starts, and a change
        # sent before that is never read (the bench then waited out its timeout).
        started = any(e.get("event") == "micro-batch done" and "rows" in e for e in events)
        if started and len(mirrored()) >= sent:
            if sent == len(changes):
                return True
            change = changes[sent]
            producer.produce(topic, key=change.key(), value=change.value(), partition=change.partition())
            producer.flush(30)
            sent += 1
        return False

    run = run_cli([*documented, "--trigger-interval", "1 second"], log, until=feed, timeout_s=900)
    ids = {e["batch_id"] for e in mirrored()}
    done = [e for e in events_of(log) if e.get("event") == "micro-batch done" and e.get("batch_id") in ids
            and "rows" in e]
    seconds = [e["duration_s"] for e in done]
    compactions = [e["seconds"] for e in events_of(log) if e.get("event") == "mirror compacted"]
    # The first creates the changelog's table (once per mirror): the median is of the others.
    return {"batch_s": seconds, "median_s": statistics.median(seconds[1:]) if len(seconds) > 1 else None,
            "compactions_s": compactions, "run": run}


def batches_into(endpoints: Any, config: Path, root: Path, wide_topic: str, folder: Path, label: str,
                 changes: list[Any], modes: list[str]) -> dict[str, Any]:
    """1-record micro-batches into the mirror at `root`: compacting each, then with the defaults."""
    found: dict[str, Any] = {}
    half = len(changes) // 2  # other changes for the second mode: those of the first are applied
    for mode, extra, sent in (("compact_each", ["--compact-every-batches", "1"], changes[half:]),
                              ("append", [], changes[:half])):
        if mode not in modes:
            continue
        work = folder / f"{label}-{mode}"
        work.mkdir()
        documented = ["--config", str(config), "--topics", wide_topic, "--checkpoint", str(work / "checkpoint"),
                      "--delta", str(root), "--starting-offsets", "latest", *extra]
        found[mode] = one_record_batches(endpoints, documented, wide_topic, work, sent)
    return found


def main() -> int:
    report = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", required=True, help="an earlier mirror backlog run's topics (W,I,D)")
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--tail", type=int, default=20_000, help="records of the wide topic in the small mirror")
    parser.add_argument("--batches", type=int, default=6, help="1-record micro-batches per mirror and mode")
    parser.add_argument("--cluster", action="store_true", help="cluster both tables by their keys first")
    parser.add_argument("--modes", default="compact_each,append", help="compact_each and/or append")
    parser.add_argument("--record", action="store_true", help="merge its key into bench/results.json")
    args = parser.parse_args()
    endpoints = StackManager.default().endpoints
    CLI[-1] = "mirror"
    run = backlog(endpoints, 0, None, args.topics, "spark-mirror-large-")
    wide_topic = next(t for t in run.topics if t.endswith(".wide"))
    folder = run.folder
    result: dict[str, Any] = {"bench": "spark_mirror_large_table", "topic": wide_topic, "folder": str(folder),
                              "load_average_start": os.getloadavg()}
    result["small_mirror"] = small_mirror(endpoints, run.config, run.topics, folder, args.tail)
    small_table = folder / "small" / run.keyspace / "wide"
    large_root = folder / "large"
    result["large_mirror"] = grow(small_table, large_root / run.keyspace / "wide", args.rows)
    changes = changes_before(endpoints, wide_topic, max(0, result["small_mirror"]["wide_from"] - 4 * args.batches),
                             2 * args.batches)
    modes = args.modes.split(",")
    if args.cluster:
        result["clustered"] = {"small": cluster(small_table), "large": cluster(large_root / run.keyspace / "wide")}
    result["into_small"] = batches_into(endpoints, run.config, folder / "small", wide_topic, folder, "small",
                                        changes, modes)
    result["into_large"] = batches_into(endpoints, run.config, large_root, wide_topic, folder, "large", changes, modes)
    for mode in modes:
        small, large = (result[f"into_{side}"][mode]["median_s"] for side in ("small", "large"))
        result[f"{mode}_ratio_large_to_small"] = round(large / small, 2) if small and large else None
    if "append" in modes:
        result["spark_mirror_large_table_batch_s"] = result["into_large"]["append"]["median_s"]
    result["load_average_end"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    print(json.dumps(result), file=report, flush=True)
    if args.record:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.results import record_report

        record_report(result, {"spark_mirror_large_table_batch_s": "spark_mirror_large_table_batch_s"},
                      bench="spark_mirror_large_table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
