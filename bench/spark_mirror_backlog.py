"""The mirror alone over a big backlog, with the documented command and its defaults
(`bench/spark_bench.py --mirror-backlog N`).

A `bridge_devstack.sim` realistic backlog of N changes (tables `wide` and `imaged`, 10,000 and 500
partitions of 20 rows: up to 210,000 keys; inserts, partial updates, element changes, row, range
and partition deletes) is carried to Kafka by a real worker writing JSON with schemas (or Avro,
`--converter avro`), with the dropped-changes topic on (`--keyspace` reuses a filled keyspace;
`--topics A,B,C` reuses the topics an earlier run's worker wrote, as its report lists them).
Then `cdc-bridge spark mirror --config F --checkpoint D --delta P --available-now` runs as its
own process, with Spark's event log on. Measured:

- overall rows/s (input records over the query's time up to the end-of-run compaction's end,
  session start excluded and reported apart) and steady rows/s (the micro-batches after the
  first, compactions inside them included); each compaction's table, rows and seconds;
- per micro-batch: duration, rows, Spark jobs (from the event log: the jobs whose
  `streaming.sql.batchId` is the batch's) and the seconds spent inside jobs (the rest is the
  driver: planning, Delta's log, Python);
- `--max-batches K` stops the job after K micro-batches (a slow version over a big backlog);
- `--compare PATH`: the mirror's tables against another run's (`PATH/<keyspace>/<table>`), row
  for row (all columns but the per-cell timestamps), e.g. the version before a rewrite.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_flatten_backlog import CLI
from spark_flatten_backlog import _events as events_of
from spark_flatten_backlog import _overhead as overhead_of
from spark_flatten_backlog import _run as run_cli
from spark_flatten_backlog import _timestamp as timestamp_of
from worker_bench import catchup, properties

from tests.spark.jobs import end_offsets, wait_settled

TABLES = ("wide", "imaged")


def _schemas(converter: str) -> dict[str, str]:
    """JSON is carried with schemas (the documented default); Avro's are in the registry."""
    return {"value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true"} \
        if converter == "json" else {}


def _carry(endpoints: Any, changes: int, keyspace: str | None, converter: str = "json") -> tuple[str, str, list[str]]:
    """Fill (or reuse) the keyspace, carry it to Kafka; returns (keyspace, worker name, topics)."""
    dropped = f"mbench-{uuid.uuid4().hex[:8]}.dropped"
    settings = {**_schemas(converter), "dropped.changes.topic": dropped}
    carried = catchup(SimpleNamespace(keyspace=keyspace, changes=changes, mix="realistic", converter=converter,
                                      workers=1, timeout=3600, profile=None, profile_gil=False, settings=settings),
                      endpoints)
    topics = [*carried["topics"], dropped]
    wait_settled(endpoints.kafka_bootstrap, topics, timeout_s=600)
    return str(carried["keyspace"]), topics[0].split(".")[0], topics


def _jobs_by_batch(events_dir: Path) -> dict[int, dict[str, Any]]:
    """Per micro-batch: its Spark jobs, their summed duration and the call sites of their stages."""
    starts: dict[int, tuple[int, int]] = {}
    ends: dict[int, int] = {}
    sites: dict[int, Counter[str]] = defaultdict(Counter)
    for log in sorted(p for p in events_dir.rglob("events_*") if p.is_file()):
        raw = subprocess.run(["zstd", "-dc", str(log)], check=True, capture_output=True).stdout \
            if log.suffix == ".zstd" else log.read_bytes()
        for line in raw.decode(errors="replace").splitlines():
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                properties = event.get("Properties") or {}
                batch = properties.get("streaming.sql.batchId")
                if batch is not None:
                    starts[event["Job ID"]] = (int(batch), event["Submission Time"])
                    description = properties.get("spark.job.description") or ""
                    if not description or description.startswith("\nid = "):  # the streaming query's own
                        stages = event.get("Stage Infos", [])
                        description = stages[-1]["Stage Name"].split(" at ")[0] if stages else "?"
                    sites[int(batch)][description.split(":")[0:2][-1].strip()[:60]] += 1
            elif kind == "SparkListenerJobEnd":
                ends[event["Job ID"]] = event["Completion Time"]
    found: dict[int, dict[str, Any]] = {}
    for job, (batch, began) in starts.items():
        entry = found.setdefault(batch, {"jobs": 0, "in_jobs_s": 0.0})
        entry["jobs"] += 1
        entry["in_jobs_s"] += (ends.get(job, began) - began) / 1000
    for batch, entry in found.items():
        entry["in_jobs_s"] = round(entry["in_jobs_s"], 1)
        entry["stage_calls"] = dict(sites[batch].most_common())
    return found


def differences(a: Any, b: Any) -> dict[str, int]:
    """Row-for-row differences of two Delta tables' frames over their common columns (maps as
    sorted entries: set operations cannot compare maps)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    columns = sorted(set(a.columns) & set(b.columns))

    def comparable(frame: Any) -> Any:
        return frame.select(*[F.array_sort(F.map_entries(frame[f"`{n}`"])).alias(n)
                              if isinstance(frame.schema[n].dataType, T.MapType) else frame[f"`{n}`"]
                              for n in columns])

    a, b = comparable(a), comparable(b)
    return {"rows": a.count(), "other_rows": b.count(), "only_here": a.exceptAll(b).count(),
            "only_there": b.exceptAll(a).count()}


def compare(spark: Any, mine: str, other: str, keyspace: str) -> dict[str, Any]:
    """Row-for-row differences of two mirrors of the same topics (per-cell timestamps left out)."""
    return {table: differences(*(spark.read.format("delta").load(f"{root}/{keyspace}/{table}").drop("_cdc_cell_ts")
                                 for root in (mine, other)))
            for table in TABLES}


@dataclass(frozen=True)
class Backlog:
    keyspace: str
    name: str  # the worker's
    topics: list[str]
    folder: Path  # the run's own
    config: Path  # the worker's properties, which the Spark job reads with --config
    inputs: int  # the topics' offsets


def backlog(endpoints: Any, changes: int, keyspace: str | None, topics_from: str | None, prefix: str,
            converter: str = "json") -> Backlog:
    """An earlier run's topics ("<name>.<keyspace>.wide,<name>.<keyspace>.imaged,<dropped>") or a
    new backlog of `changes`, and a worker config naming them (JSON with schemas, or Avro)."""
    if topics_from:
        topics = topics_from.split(",")
        name, keyspace = topics[0].split(".")[:2]
    else:
        keyspace, name, topics = _carry(endpoints, changes, keyspace, converter)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    config = folder / "worker.properties"
    extra = _schemas(converter)
    if topics[-1].endswith(".dropped"):
        extra["dropped.changes.topic"] = topics[-1]
    config.write_text(properties(endpoints, name, ",".join(f"{keyspace}.{t}" for t in TABLES), converter, 2000,
                                 extra=extra))
    return Backlog(keyspace, name, topics, folder, config, sum(end_offsets(endpoints.kafka_bootstrap, topics).values()))


def mirror_backlog(endpoints: Any, changes: int, keyspace: str | None, topics_from: str | None,
                   extra: list[str], max_batches: int | None, compare_with: str | None,
                   converter: str = "json") -> dict[str, Any]:
    run = backlog(endpoints, changes, keyspace, topics_from, "spark-mirror-bench-", converter)
    keyspace, name, topics = run.keyspace, run.name, run.topics
    folder, config, inputs = run.folder, run.config, run.inputs
    events_dir = folder / "events"
    events_dir.mkdir()
    delta = folder / "mirror"
    documented = ["--config", str(config), "--checkpoint", str(folder / "checkpoint"), "--delta", str(delta)]
    measuring = ["--spark-conf", "spark.eventLog.enabled=true", "--spark-conf", f"spark.eventLog.dir={events_dir}",
                 "--spark-conf", "spark.eventLog.compress=false"]
    log = folder / "mirror.log"

    def enough() -> bool:
        if max_batches is None:
            return False
        return sum(1 for e in events_of(log) if e.get("event") == "micro-batch done" and "rows" in e) >= max_batches

    CLI[-1] = "mirror"  # the same runner as flatten's, for the mirror command
    run = run_cli([*documented, *extra, *measuring, "--available-now"], log, until=enough, timeout_s=4 * 3600)
    events = events_of(log)
    batches = [e for e in events if e.get("event") == "micro-batch done" and "rows" in e]
    started = next((e for e in events if e.get("event") == "query started"), None)
    rows = sum(int(b["rows"]) for b in batches)
    jobs = _jobs_by_batch(events_dir)
    result: dict[str, Any] = {
        "bench": "spark_mirror_backlog", "converter": converter, "keyspace": keyspace, "worker_name": name,
        "topics": topics, "backlog_changes": changes, "input_offsets_incl_markers": inputs, "input_records": rows,
        "command": "cdc-bridge spark mirror " + " ".join([*documented, *extra]) + " --available-now", **run,
        "micro_batches": len(batches), "delta": str(delta),
        "oom": "OutOfMemoryError" in log.read_text(errors="replace"),
        "error_lines": [line for line in log.read_text(errors="replace").splitlines() if line.startswith("error: ")],
    }
    compactions = [e for e in events if e.get("event") == "mirror compacted"]
    result["compactions"] = [{"table": e["table"], "rows_changed": e["rows_changed"], "s": e["seconds"]}
                             for e in compactions]
    if batches and started:
        # merge-on-read: the run ends with the last table's compaction, which counts
        ended = max([timestamp_of(batches[-1]), *[timestamp_of(e) for e in compactions]])
        query_s = ended - timestamp_of(started)
        steady = batches[1:] or batches
        result.update({
            "query_s": round(query_s, 1), "rows_per_s_overall": round(rows / query_s),
            "rows_per_cpu_s": round(rows / run["cpu_s"]) if run["cpu_s"] else None,
            "rows_per_s_steady": round(sum(b["rows"] for b in steady) / sum(b["duration_s"] for b in steady)),
            "batch_s": {"first": batches[0]["duration_s"],
                        "median": statistics.median(b["duration_s"] for b in batches),
                        "max": max(b["duration_s"] for b in batches)},
            "batches": [{"id": b["batch_id"], "rows": b["rows"], "s": b["duration_s"],
                         **{k: v for k, v in jobs.get(int(b["batch_id"]), {}).items() if k != "stage_calls"}}
                        for b in batches],
            "stage_calls_batch_1": jobs.get(1, {}).get("stage_calls"),
        })
    if compare_with:
        from bridge.spark.core.session import build_session

        spark = build_session("local[2]", app_name="cdc-bridge-bench-compare")
        try:
            result["compare"] = compare(spark, str(delta), compare_with, keyspace)
        finally:
            spark.stop()
    # 1-record and tombstone-only micro-batches into a mirror of its own, from the topic's end
    fresh = ["--config", str(config), "--checkpoint", str(folder / "checkpoint-overhead"),
             "--delta", str(folder / "mirror-overhead"), "--starting-offsets", "latest"]
    result["overhead"] = overhead_of(endpoints, fresh, topics[0], folder)
    # the same into the backlog's mirror (its rows, merge-on-read: the micro-batch appends to the
    # changelog and does not read the table; one in --compact-every-batches also compacts)
    into_big = ["--config", str(config), "--checkpoint", str(folder / "checkpoint-overhead-big"),
                "--delta", str(delta), "--starting-offsets", "latest"]
    (folder / "big").mkdir()
    result["overhead_into_backlog_mirror"] = overhead_of(endpoints, into_big, topics[0], folder / "big")
    result["load_average"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return result
