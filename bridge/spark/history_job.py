"""`cdc-bridge spark history` (the streaming query, as `jobs.start_mirror` wires the mirror's) and
`cdc-bridge spark as-of` (a history table's state at a timestamp)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from bridge.spark.core.errors import SparkJobError
from bridge.spark.runner import JobRequest, run_job

# The history's default `--max-offsets-per-trigger`: each table's micro-batch costs ~10 s of
# Spark jobs and Delta commits whatever its size (the known keys' split, the open versions'
# read, the appends, the MERGE); a bigger micro-batch spreads them over more records
# (bench/README.md, "Spark history").
HISTORY_BATCH_CAP = 500_000


def start_history(spark: Any, source: Any, run: Any, *, root: str, track_on: tuple[str, ...] = (),
                  track_except: tuple[str, ...] = ()) -> Any:
    from bridge.spark.core.kafka_ranges import KafkaRanges
    from bridge.spark.history.writer import HistoryWriter
    from bridge.spark.jobs import avro_decoder, folding_source, kafka_options, read_stream, start

    problem = source.cdc.mirror_problem()  # the history rebuilds rows as the mirror does
    if problem is not None:
        raise SparkJobError(problem.replace("mirror", "history"))
    name = run.job_name("history")
    if source.max_offsets_per_trigger is None:
        source = dataclasses.replace(source, max_offsets_per_trigger=HISTORY_BATCH_CAP)
    source = folding_source(spark, source)  # the history reads and decodes as the mirror does
    writer = HistoryWriter(root, name, source.value_format, avro_decoder(source), source.cdc, source.registry_url,
                           track_on, track_except, KafkaRanges(kafka_options(source)))
    return start(spark, read_stream(spark, source), writer, run, name)


def track_names(values: list[str]) -> tuple[str, ...]:
    return tuple(n.strip() for value in values for n in value.split(",") if n.strip())


def run_history(job: JobRequest, *, root: str, track_on: tuple[str, ...], track_except: tuple[str, ...]) -> int:
    if track_on and track_except:
        print("error: --track-history-on / --track-history-except: give at most one of them", file=sys.stderr)
        return 2

    def begin(spark: Any, source: Any, run: Any) -> Any:
        return start_history(spark, source, run, root=root, track_on=track_on, track_except=track_except)

    def refuse_what_history_cannot_rebuild(source: Any) -> None:  # before a Spark session costs ~10 s
        problem = source.cdc.mirror_problem()
        if problem is not None:
            raise SparkJobError(problem.replace("mirror", "history"))

    return run_job(job, begin, refuse_what_history_cannot_rebuild)


def run_as_of(path: str, timestamp: str, master: str | None, limit: int) -> int:
    """Print the state of the history table at `path` at `timestamp` (microseconds since the
    epoch, or a timestamp text in UTC), one JSON row per line."""
    from bridge.spark.core.session import build_session
    from bridge.spark.core.spark_log import default_path
    from bridge.spark.history.writer import as_of

    at: str | int = int(timestamp) if timestamp.isdigit() else timestamp
    # Spark's own console output to a file, as the jobs do (docs/spark.md): stdout holds the rows
    spark_log = None if master in (None, "", "none") else default_path("as-of")
    if spark_log is not None:
        print(f"spark's own output goes to {spark_log}", file=sys.stderr)
    spark = build_session(None if spark_log is None else master, conf={"spark.sql.session.timeZone": "UTC"},
                          spark_log=spark_log)
    try:
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(spark, path):
            print(f"error: --path: {path} is not a history table (no Delta table there)", file=sys.stderr)
            return 2
        from pyspark.sql import functions as F

        state = as_of(spark, path, at).limit(limit)
        for row in state.select(F.to_json(F.struct(*[F.col(f"`{c}`") for c in state.columns]))).collect():
            print(row[0])
    finally:
        spark.stop()
    return 0
