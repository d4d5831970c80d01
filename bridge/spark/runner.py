"""Running one job: its Kafka source assembled from the worker's settings file and the flags, the
Spark session, the query, and its end.

A job that cannot start (a bad flag or setting) returns 2 after one `error:` line; a job whose
JVM or query fails ends the process with one line naming the cause and the setting that helps
(`fatal.py`), never hangs. A normal end (`--available-now`, SIGTERM) returns 0 after the last
micro-batch's progress line.
"""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.settings import ConfigError, load_config
from bridge.spark.core.errors import SparkJobError

StartQuery = Callable[[Any, Any, Any], Any]  # (spark, SourceOptions, RunOptions) -> StreamingQuery


@dataclass(frozen=True)
class JobRequest:
    """What the command line asked for, flags as given (`kafka` and `spark_conf` as KEY=VALUE)."""

    checkpoint: str
    config: Path | None = None
    bootstrap_servers: str | None = None
    topics: str | None = None
    topic_pattern: str | None = None
    dropped_changes_topic: str | None = None
    value_format: str | None = None
    registry_url: str | None = None
    kafka: Sequence[str] = ()
    name: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    trigger_interval: str = "2 seconds"
    available_now: bool = False
    master: str | None = None
    driver_memory: str = "1g"
    executor_memory: str = "1g"
    spark_ui: bool = False
    spark_conf: Sequence[str] = ()
    # the envelopes' format when there is no --config (or to override it): `cdc.*` name -> text
    cdc: Mapping[str, str | None] = field(default_factory=dict)
    # where a local JVM's console output goes (None: a new file in the temp folder); verbose: here
    spark_log: Path | None = None
    verbose: bool = False


def run_flatten(job: JobRequest, *, options: Sequence[str], topic_rule: str | None, delta_root: str | None,
                schemas_out: bool | None, commit_topic: str) -> int:
    from bridge.spark.core.smt_options import SmtOptions
    from bridge.spark.jobs import start_flatten

    def start(spark: Any, source: Any, run: Any) -> Any:
        smt = SmtOptions.from_properties(pairs(options, "--option"), advanced_input=source.cdc.advanced)
        return start_flatten(spark, source, smt, run, topic_rule=topic_rule, delta_root=delta_root,
                             schemas_out=schemas_out, commit_topic=commit_topic)

    return run_job(job, start)


def run_mirror(job: JobRequest, *, delta_root: str, compact_every_batches: int | None = None,
               compact_every_changes: int | None = None, compact_after_s: float | None = None) -> int:
    from bridge.spark.jobs import start_mirror
    from bridge.spark.mirror.writer import COMPACT_AFTER_SECONDS, COMPACT_EVERY_BATCHES, COMPACT_EVERY_CHANGES

    def start(spark: Any, source: Any, run: Any) -> Any:
        return start_mirror(spark, source, run, delta_root=delta_root,
                            compact_every_batches=COMPACT_EVERY_BATCHES if compact_every_batches is None
                            else compact_every_batches,
                            compact_every_changes=COMPACT_EVERY_CHANGES if compact_every_changes is None
                            else compact_every_changes,
                            compact_after_s=COMPACT_AFTER_SECONDS if compact_after_s is None else compact_after_s)

    def refuse_what_mirror_cannot_rebuild(source: Any) -> None:  # before a Spark session costs ~10 s
        problem = source.cdc.mirror_problem()
        if problem is not None:
            raise SparkJobError(problem)

    return run_job(job, start, refuse_what_mirror_cannot_rebuild)


def pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    found = {}
    for pair in values:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise SparkJobError(f"{flag}: {pair!r} is not KEY=VALUE")
        found[key.strip()] = value.strip()
    return found


def source_options(job: JobRequest) -> Any:
    """The Kafka source: the worker's file gives topics (`topic.prefix` + `scylla.table.names`), the
    value converter, the registry, `dropped.changes.topic` and `kafka.*`; flags override it."""
    from bridge.spark.core.cdc_format import CdcFormat
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.jobs import SourceOptions

    topics: list[str] = []
    kafka: dict[str, str] = {}
    cdc = CdcFormat()
    value_format, registry, dropped = None, None, job.dropped_changes_topic
    if job.config is not None:
        config = load_config(job.config)
        topics = [f"{config.topic_prefix}.{ks}.{table}" for ks, table in config.tables()]
        kafka = config.kafka_client_config()
        schemas = config.value_schemas_enable
        value_format = ("avro" if config.value_converter == "avro" else "json-schemas" if schemas else "json")
        registry = config.value_registry_url
        dropped = dropped or config.dropped_changes_topic
        cdc = CdcFormat.of_worker(config.envelope_settings())
    cdc = cdc.overridden(job.cdc)
    kafka.update(pairs(job.kafka, "--kafka"))
    bootstrap = job.bootstrap_servers or kafka.pop("bootstrap.servers", None)
    kafka.pop("bootstrap.servers", None)
    if not bootstrap:
        raise SparkJobError("--bootstrap-servers: required (or kafka.bootstrap.servers in --config)")
    if job.topics:
        topics = [t.strip() for t in job.topics.split(",") if t.strip()]
    if job.topic_pattern:
        topics = []
    if dropped and topics:
        topics.append(dropped)
    return SourceOptions(bootstrap_servers=bootstrap, topics=tuple(topics), pattern=job.topic_pattern,
                         value_format=ValueFormat(job.value_format or value_format or "json-schemas"),
                         registry_url=job.registry_url or registry, starting_offsets=job.starting_offsets,
                         max_offsets_per_trigger=job.max_offsets_per_trigger, kafka=kafka,
                         min_partitions=job.min_partitions, cdc=cdc)


def spark_conf(job: JobRequest) -> dict[str, str]:
    conf = {"spark.driver.memory": job.driver_memory, "spark.executor.memory": job.executor_memory}
    if job.spark_ui:
        conf["spark.ui.enabled"] = "true"
    return {**conf, **pairs(job.spark_conf, "--spark-conf")}


def spark_log_path(job: JobRequest, master: str | None) -> Path | None:
    """The file a local JVM writes its console output to, told once on the console (None: the JVM
    writes to the console: --verbose, or spark-submit started it)."""
    return spark_log_file(job.spark_log, job.verbose, master, job.name or Path(job.checkpoint).name)


def spark_log_file(chosen: Path | None, verbose: bool, master: str | None, name: str) -> Path | None:
    """`chosen` (--spark-log), or a new file named after `name`, told once; None with --verbose or
    under spark-submit (master None), where the JVM writes to the console."""
    import structlog

    from bridge.spark.core.spark_log import default_path

    if verbose or master is None:
        return None
    path = chosen or default_path(re.sub(r"[^\w.-]+", "_", name) or "job")
    structlog.get_logger("bridge.spark").info("spark's own output goes to a file (--verbose: here)", path=str(path))
    return path


def run_job(job: JobRequest, start: StartQuery, preflight: Callable[[Any], None] | None = None) -> int:
    from bridge.observability import configure_logging
    from bridge.spark.core.executors import check_executor_python
    from bridge.spark.core.fatal import explain, fail, failure_line, start_line, watch_jvm
    from bridge.spark.core.progress import ProgressLogger
    from bridge.spark.core.session import build_session
    from bridge.spark.jobs import RunOptions

    configure_logging()
    try:
        source = source_options(job)
        if preflight is not None:
            preflight(source)
        run = RunOptions(checkpoint=job.checkpoint, name=job.name, trigger_interval=job.trigger_interval,
                         available_now=job.available_now)
        master = None if job.master in (None, "", "none") else job.master
        spark = build_session(master, conf=spark_conf(job), spark_log=spark_log_path(job, master))
    except (SparkJobError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # the JVM did not start (e.g. a heap too small for Spark)
        fail(start_line(str(error)))
    watch_jvm(spark)
    try:
        check_executor_python(spark)
        progress = ProgressLogger()
        spark.streams.addListener(progress)
        query = start(spark, source, run)
    except (SparkJobError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # py4j: the JVM failed or is gone
        fail(failure_line(spark, str(error)))
    signal.signal(signal.SIGTERM, lambda *_: query.stop())
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except Exception as error:  # the query failed (raised here) or the JVM is gone (py4j)
        fail(failure_line(spark, str(error)))
    failure = query.exception()
    if failure is not None:
        fail(explain(str(failure)))
    progress.drain(spark, query)
    return 0
