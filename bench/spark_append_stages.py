"""Where a mirror append's time goes: one table's records of a topic, stage by stage.

    .venv/bin/python bench/spark_append_stages.py TOPIC [--records 70000] [--repeat 3]

TOPIC: a topic of JSON-with-schemas envelopes the bench's backlog filled (`bench/spark_bench.py
--mirror-backlog N` lists them), one partition. In one `local[2]` session over the topic's first
`--records` offsets, read as the mirror reads them (split in 4, read_committed), each stage runs
once to warm the JIT, then `--repeat` times in turn with the others, its best run counting: the
Kafka read; the schema groups' job (`decode.json_groups`, which only a topic without a known
schema pays); the payloads parsed (`from_json`); the fold's events built
(`fold.frames.change_events`); the events written as Parquet, as a Delta table with Delta's
default column statistics and as one without (`fold.delta_tables.NO_STATISTICS`); and the
mirror's own append of them (`MirrorWriter.append`, batch after batch into one mirror). Outputs
other than files go to Spark's `noop` sink. Prints one JSON object, each stage also as a ratio to
the Kafka read of the same run. Needs the local stack.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import DataFrame

from bridge.observability import configure_logging
from bridge.spark.core.decode import ValueFormat, json_groups
from bridge.spark.core.kafka_ranges import KafkaRanges
from bridge.spark.core.session import build_session
from bridge.spark.fold.delta_tables import NO_STATISTICS
from bridge.spark.fold.frames import MirrorColumns, change_events
from bridge.spark.mirror.writer import MirrorWriter
from bridge_devstack.stack.manager import StackManager


def _timed(run: Callable[[], object]) -> float:
    started = time.monotonic()
    run()
    return round(time.monotonic() - started, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topic")
    parser.add_argument("--records", type=int, default=70_000, help="offsets read from the topic's start")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each stage (the best counts)")
    args = parser.parse_args()
    configure_logging(file=sys.stderr)  # the job's own log lines; stdout holds the report alone
    bootstrap = StackManager.default().endpoints.kafka_bootstrap
    spark = build_session("local[2]", "append-stages")
    # the mirror's re-read of a topic's offsets (`core.kafka_ranges`), with its source's options
    reader = KafkaRanges({"kafka.bootstrap.servers": bootstrap, "kafka.isolation.level": "read_committed",
                          "includeHeaders": "true", "minPartitions": "4"})
    raw = reader.read(spark, args.topic, {0: (0, args.records)})
    groups = [g for g in json_groups(raw) if g.kind == "envelope"]
    if len(groups) != 1:
        raise SystemExit(f"{args.topic}: {len(groups)} envelope schemas in its first records, not one")
    group = groups[0]
    columns = MirrorColumns(group.shape.columns if group.shape else ())
    events = change_events(group, columns)
    folder = tempfile.mkdtemp(prefix="append-stages-")
    written = itertools.count()

    def noop(frame: DataFrame) -> Callable[[], object]:
        return lambda: frame.write.format("noop").mode("overwrite").save()

    def files(fmt: str, options: dict[str, str]) -> Callable[[], object]:
        return lambda: events.write.format(fmt).options(**options).save(f"{folder}/{fmt}-{next(written)}")

    # the product's append of the table's changes into one mirror, as micro-batch after micro-batch
    # (its table and changelog exist after the warm-up run), without range deletes
    writer = MirrorWriter(f"{folder}/mirror", "append-stages", ValueFormat.JSON_SCHEMAS)
    batch_ids = itertools.count()

    def mirror_append() -> object:
        return writer.append(spark, group.keyspace_table, [group], [], next(batch_ids))

    stages = {
        "kafka_read": noop(raw),
        "schema_groups_job": lambda: json_groups(raw),
        "payloads_parsed": noop(group.frame),
        "events_built": noop(events),
        "events_to_parquet": files("parquet", {}),
        "events_to_delta_with_statistics": files("delta", {}),
        "events_to_delta_without_statistics": files("delta", NO_STATISTICS),
        "mirror_append": mirror_append,
    }
    report: dict[str, object] = {"bench": "spark_append_stages", "topic": args.topic, "offsets": args.records,
                                 "records": group.records, "columns": len(columns.columns)}
    for run in stages.values():  # the JIT's warm-up, not counted
        run()
    runs: dict[str, list[float]] = {name: [] for name in stages}
    for round_ in range(args.repeat):  # round robin: a machine's slower spell falls on every stage
        for name, run in stages.items():
            runs[name].append(_timed(run))
        print(f"round {round_ + 1}: {runs}", file=sys.stderr, flush=True)
    seconds = {name: min(times) for name, times in runs.items()}
    report["runs_s"], report["best_s"] = runs, seconds
    report["ratio_to_kafka_read"] = {name: round(s / seconds["kafka_read"], 2) for name, s in seconds.items()}
    print(json.dumps(report))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
