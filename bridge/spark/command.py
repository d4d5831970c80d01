"""The Spark jobs' command line: `cdc-bridge spark flatten|mirror|history|as-of|compact|packages`
(registered by `bridge/cli/spark.py`) and `python -m bridge.spark ...` (spark-submit, `main`): the
flags; the jobs themselves start in `bridge/spark/runner.py`.

Both jobs need a checkpoint location: Spark keeps there the Kafka offsets of every micro-batch,
so a restarted job resumes where it stopped and re-runs an unfinished micro-batch with the same
id (which the outputs use to write it once). One checkpoint belongs to one job; a new checkpoint
starts again at `--starting-offsets`.

`--config worker.properties` takes the topics (`topic.prefix` + `scylla.table.names`), the value
converter, the registry, `dropped.changes.topic` and `kafka.*` from the worker's own file; flags
override it. pyspark is imported only when a job starts, so the command exists without the
`spark` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_TOPIC_RULE = "{topic}.flat"
# A 2-core, 4 GiB machine: 1 GiB of heap for the driver (local mode: the tasks too), the rest to
# the Python workers, Kafka's client buffers and the page cache.
DEFAULT_MEMORY = "1g"


def add_jobs(jobs: Any, default_master: str | None) -> None:
    flatten = jobs.add_parser("flatten", help="ExtractNewRecordState-style flattening to Kafka and/or Delta",
                              description="Flatten the envelopes like Debezium's ExtractNewRecordState "
                                          "(+ ScyllaExtractNewRecordState), exactly once.")
    _common(flatten, default_master)
    flatten.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                         help="an SMT option by Debezium's name, e.g. delete.tombstone.handling.mode=rewrite, "
                              "add.fields=op,source.ts_ms, add.headers=op (repeatable)")
    flatten.add_argument("--output-topic", metavar="RULE", help="output topic naming rule with {topic}, {prefix}, "
                         f"{{keyspace}}, {{table}} (default {DEFAULT_TOPIC_RULE} unless only --output-delta)")
    flatten.add_argument("--output-delta", metavar="PATH", help="also append the flattened records to Delta "
                         "tables PATH/<keyspace>/<table>")
    flatten.add_argument("--output-format", choices=["json", "json-schemas"], help="JSON of the flattened "
                         "values, with or without their Connect schema (default: as the input; json for Avro)")
    flatten.add_argument("--commit-topic", default="cdc-bridge-spark-commits",
                         help="compacted topic holding each job's last micro-batch written to Kafka")
    flatten.set_defaults(handler=_flatten)
    mirror = jobs.add_parser("mirror", help="keep one Delta table per source table equal to it",
                             description="Append each micro-batch to changelogs PATH/_cdc_changes/<keyspace>/<table> "
                             "and MERGE them into Delta tables PATH/<keyspace>/<table> (merge-on-read).")
    _common(mirror, default_master)
    mirror.add_argument("--delta", required=True, metavar="PATH", help="root folder of the mirror tables")
    mirror.add_argument("--compact-every-batches", type=int, metavar="N", help="fold the pending changes into "
                        "the Delta tables every N micro-batches (default 10) and at the end of --available-now; "
                        "between compactions Spark readers get the current state from "
                        "bridge.spark.mirror.view.current_state")
    mirror.add_argument("--compact-every-changes", type=int, metavar="M", help="... or once M changes are "
                        "pending (default 500000)")
    mirror.add_argument("--compact-after-seconds", type=_seconds, metavar="S", help="... or, running continuously, "
                        "once changes have been pending S seconds, with or without new micro-batches (default 60)")
    mirror.set_defaults(handler=_mirror)
    compact = jobs.add_parser("compact", help="fold the mirror's pending changes into its Delta tables now",
                              description="Fold each changelog PATH/_cdc_changes/<keyspace>/<table> into "
                              "PATH/<keyspace>/<table> with one MERGE per table (a maintenance job; safe beside a "
                              "running mirror: appends made meanwhile stay pending).")
    compact.add_argument("--delta", required=True, metavar="PATH", help="root folder of the mirror tables")
    compact.add_argument("--table", action="append", default=[], metavar="KEYSPACE.TABLE",
                         help="only this table (repeatable; default every table with a changelog)")
    compact.add_argument("--master", default=default_master, help="Spark master (default %(default)s)")
    compact.add_argument("--spark-log", type=Path, metavar="PATH", help="Spark's own console output goes to "
                         "this file (default: a new file under <temp>/cdc-bridge-spark/)")
    compact.add_argument("--verbose", action="store_true", help="Spark's own console output here, not in a file")
    compact.set_defaults(handler=_compact)
    history = jobs.add_parser("history", help="keep every version of every row (SCD type 2) in Delta tables",
                              description="Append each micro-batch's changes to PATH/_cdc_changes/<keyspace>/<table> "
                              "and MERGE the versions of the keys they touch into PATH/<keyspace>/<table> "
                              "(__START_AT, __END_AT, __START_OP, __START_OFFSET; docs/spark.md, History).")
    _common(history, default_master)
    history.add_argument("--output", required=True, metavar="PATH", help="root folder of the history tables")
    history.add_argument("--track-history-on", action="append", default=[], metavar="COL,...",
                         help="only changes of these columns start a version (col or keyspace.table.col; the "
                              "others update the current version in place)")
    history.add_argument("--track-history-except", action="append", default=[], metavar="COL,...",
                         help="changes of these columns alone update the current version in place")
    history.set_defaults(handler=_history)
    as_of = jobs.add_parser("as-of", help="print a history table's rows as they were at a timestamp",
                            description="The version of every row holding at --timestamp, one JSON line each.")
    as_of.add_argument("--path", required=True, help="the history table, e.g. PATH/<keyspace>/<table>")
    as_of.add_argument("--timestamp", required=True, help="microseconds since the epoch (as source.ts_us) or "
                       "a UTC timestamp such as '2026-03-03 12:00:00.123456'")
    as_of.add_argument("--limit", type=int, default=1000, help="rows printed at most (default %(default)s)")
    as_of.add_argument("--master", default=default_master or "local[2]", help="Spark master (default %(default)s)")
    as_of.set_defaults(handler=_as_of)
    packages = jobs.add_parser("packages", help="print the Maven packages for spark-submit --packages")
    packages.add_argument("--fetch", action="store_true", help="download them into the Ivy cache now (once; "
                          "a later start is then offline)")
    packages.set_defaults(handler=_packages)


def _seconds(text: str) -> float:
    """A number of seconds above 0, refused at the flag (before a Spark session costs ~10 s)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text!r}")
    return seconds


def _common(parser: argparse.ArgumentParser, default_master: str | None) -> None:
    parser.add_argument("--config", type=Path, help="the worker's properties file: topics, format, registry, "
                        "dropped.changes.topic and kafka.* from it")
    parser.add_argument("--bootstrap-servers", help="Kafka bootstrap servers (else kafka.bootstrap.servers)")
    parser.add_argument("--topics", help="comma-separated envelope topics (else from --config)")
    parser.add_argument("--topic-pattern", help="Java regex of topics instead of --topics")
    parser.add_argument("--dropped-changes-topic", help="also read this side topic (range / partition deletes)")
    parser.add_argument("--format", choices=["json", "json-schemas", "avro"],
                        help="value format: JSON without / with schemas, or Avro via the registry")
    parser.add_argument("--registry-url", help="Confluent-compatible schema registry (Avro)")
    parser.add_argument("--cdc-output-format", choices=["legacy", "advanced"], help="the envelopes' format, as the "
                        "worker's cdc.output.format (else from --config; default legacy)")
    parser.add_argument("--cdc-include-after", choices=["none", "full", "only-updated"], help="advanced: the "
                        "worker's cdc.include.after (else from --config; default none; mirror needs full)")
    parser.add_argument("--cdc-include-primary-key-placement", metavar="LIST", help="advanced: the worker's "
                        "cdc.include.primary-key.placement (else from --config; default "
                        "kafka-key,payload-after,payload-before)")
    parser.add_argument("--cdc-include-primary-key-payload-key-name", metavar="NAME", help="advanced: the "
                        "worker's cdc.include.primary-key.payload-key-name (else from --config; default key)")
    parser.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                        help="more Kafka client settings for source and sink (SASL, TLS; repeatable)")
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder (required): the source offsets "
                        "of every micro-batch, so a restart resumes and replays exactly")
    parser.add_argument("--name", help="job name: transactional id, commit marker and Delta app id "
                        "(default derived from the checkpoint path)")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest | latest | Spark's JSON, "
                        "used only by a new checkpoint")
    parser.add_argument("--max-offsets-per-trigger", type=int,
                        help="cap on records per micro-batch, over all topics (default 200,000 for flatten of JSON "
                        "with schemas into Kafka alone, 100,000 for mirror, 500,000 for history, else 50,000; 0: no "
                        "cap, one micro-batch takes everything there is)")
    parser.add_argument("--min-partitions", type=int, help="Spark partitions per micro-batch at least: big Kafka "
                        "partitions are read in pieces (Spark's minPartitions; flatten's default: the default "
                        "parallelism, e.g. 2 in local[2], when the topics have fewer partitions than that; mirror's: "
                        "twice the default parallelism; 0: one Spark partition per Kafka partition)")
    parser.add_argument("--trigger-interval", default="2 seconds", help="micro-batch interval")
    parser.add_argument("--available-now", action="store_true", help="process what is in Kafka now, then stop")
    parser.add_argument("--master", default=default_master, help="Spark master (default %(default)s; "
                        "none: the one spark-submit gives)")
    parser.add_argument("--driver-memory", default=DEFAULT_MEMORY, help="heap of the driver's JVM, which in "
                        "local mode also runs the tasks (default %(default)s; spark.driver.memory)")
    parser.add_argument("--executor-memory", default=DEFAULT_MEMORY, help="heap of each executor on a cluster "
                        "(default %(default)s; spark.executor.memory)")
    parser.add_argument("--spark-ui", action="store_true", help="serve the Spark UI (port 4040 or the next free "
                        "one; spark.ui.port to choose)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="more Spark settings (repeatable)")
    parser.add_argument("--spark-log", type=Path, metavar="PATH", help="Spark's own console output "
                        "(Ivy, log4j) goes to this file, its path told once (default: a new file under "
                        "<temp>/cdc-bridge-spark/; not under spark-submit, --master none); a failing job "
                        "prints its last lines")
    parser.add_argument("--verbose", action="store_true", help="Spark's own console output here, not in a file")


def _job(args: argparse.Namespace) -> Any:
    """The runner's view of the parsed flags (pyspark is imported only now)."""
    from bridge.spark.runner import JobRequest

    return JobRequest(
        config=args.config, bootstrap_servers=args.bootstrap_servers, topics=args.topics,
        topic_pattern=args.topic_pattern, dropped_changes_topic=args.dropped_changes_topic, value_format=args.format,
        registry_url=args.registry_url, kafka=args.kafka, checkpoint=args.checkpoint, name=args.name,
        starting_offsets=args.starting_offsets, max_offsets_per_trigger=args.max_offsets_per_trigger,
        min_partitions=args.min_partitions, trigger_interval=args.trigger_interval,
        available_now=args.available_now, master=args.master, driver_memory=args.driver_memory,
        executor_memory=args.executor_memory, spark_ui=args.spark_ui, spark_conf=args.spark_conf,
        cdc={"cdc.output.format": args.cdc_output_format, "cdc.include.after": args.cdc_include_after,
             "cdc.include.primary-key.placement": args.cdc_include_primary_key_placement,
             "cdc.include.primary-key.payload-key-name": args.cdc_include_primary_key_payload_key_name},
        spark_log=args.spark_log, verbose=args.verbose)


def _flatten(args: argparse.Namespace) -> int:
    from bridge.spark.runner import run_flatten

    rule = args.output_topic or (None if args.output_delta else DEFAULT_TOPIC_RULE)
    schemas = None if args.output_format is None else args.output_format == "json-schemas"
    return run_flatten(_job(args), options=args.option, topic_rule=rule, delta_root=args.output_delta,
                       schemas_out=schemas, commit_topic=args.commit_topic)


def _mirror(args: argparse.Namespace) -> int:
    from bridge.spark.runner import run_mirror

    return run_mirror(_job(args), delta_root=args.delta, compact_every_batches=args.compact_every_batches,
                      compact_every_changes=args.compact_every_changes, compact_after_s=args.compact_after_seconds)


def _compact(args: argparse.Namespace) -> int:
    from bridge.spark.compact_job import run_compact

    return run_compact(args.delta, args.table, args.master, args.spark_log, args.verbose)


def _history(args: argparse.Namespace) -> int:
    from bridge.spark.history_job import run_history, track_names

    return run_history(_job(args), root=args.output, track_on=track_names(args.track_history_on),
                       track_except=track_names(args.track_history_except))


def _as_of(args: argparse.Namespace) -> int:
    from bridge.spark.history_job import run_as_of

    return run_as_of(args.path, args.timestamp, args.master, args.limit)


def _packages(args: argparse.Namespace) -> int:
    from bridge.spark.core.session import fetch_packages, packages

    if args.fetch:
        fetched = fetch_packages()
        print(f"spark packages {'fetched into' if fetched else 'already in'} the Ivy cache", file=sys.stderr)
    print(",".join(packages()))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m bridge.spark flatten|mirror ...`: for spark-submit (the master comes from it)."""
    parser = argparse.ArgumentParser(prog="python -m bridge.spark", description="The PySpark jobs (spark-submit).")
    add_jobs(parser.add_subparsers(dest="spark_command", metavar="JOB", required=True), None)
    args = parser.parse_args(argv)
    handler = args.handler
    return int(handler(args))
