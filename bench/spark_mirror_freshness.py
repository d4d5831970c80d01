"""Write-to-visible freshness of the mirror under steady writes (issue 41): how long after a write
the exact view (`current_state`) and the compacted Delta table show it.

    .venv/bin/python bench/spark_mirror_freshness.py [--rate 2000] [--duration 300] [--sample-every 200]
        [--json-out FILE] [--record]

- A fresh keyspace gets one CDC table `t (pk int, ck int, v int)`; a writer thread in this process
  writes `--rate` single-row changes per second through the project's emulator (`bridge_devstack.sim`:
  planned as `bridge_devstack.sim.load.bulk_fill` plans them, base and log rows, `cdc$time` stamped when a
  chunk of at most 100 writes is planned, each chunk sent before the next is planned: a writer
  behind its rate catches up by up to 1000 writes a tick, and a row landing later than the
  worker's 2 s confidence window after its time is never read) into the real Cassandra.
  Every `--sample-every`-th write is a sample: a new row of the marker partition (`pk = -1`,
  `ck` = the sample's number); its write time is its `cdc$time` (wall clock). The other writes
  update `--partitions` x 20 rows.
- One real worker (`cdc-bridge run`, JSON with schemas, its defaults: 2 s confidence window)
  carries the table to Kafka; `cdc-bridge spark mirror --config F --checkpoint D --delta P` runs
  as a user starts it (default trigger, no tuning flag) from a few warm-up writes on; the measured
  writes begin once its first micro-batch is done.
- This process polls (every `--poll-s`, each poll bounded by Spark's own time) the marker
  partition in the exact view (`bridge.spark.mirror.view.current_state`, docs/spark.md "Reading
  the mirror") and in the compacted table (`spark.read.format("delta")` of `PATH/<ks>/t`), in its
  own Spark session (local[1]). A sample counts as visible when `current_state` (which folds the
  pending changes: most of a poll's time) returned for the first poll that shows it: an upper
  bound, as the poll's snapshots were taken at its start. `*_from_poll_start` count to that
  poll's start instead (a lower bound but for the snapshots' own resolution, a few tens of ms);
  the true figure is between the two, whose gap is the polls' duration (reported).
- Where a sample's time went (`mirror_freshness_stages`; p50/p99 also in the periodic line), from
  the topic read alongside by a consumer of this process and the mirror's own records:
  `write_to_kafka`, from its `cdc$time` to its Kafka record's timestamp (the worker's producer's
  clock when it produced it: the confidence window, the worker's reads and its translation);
  `kafka_to_appended`, from there to the `micro-batch mirrored` line of table `t` of the
  micro-batch whose offsets (the checkpoint's `offsets/<batch id>`) hold the record (its
  transaction's commit, the wait for the micro-batch to start, then the micro-batch itself:
  split in `kafka_to_batch_start`, to the batch's `batchTimestampMs`, and `batch_start_to_appended`);
  `appended_to_view`, the rest (the wait for the next poll and the poll's own time;
  `appended_to_poll_start` counts to the poll's start). Each stage's percentiles are its own:
  they do not add up to the total's.
- After `--duration` s the writer goes on writing unsampled changes at the same rate until every
  sample was seen in both (bounded by `--drain-timeout`: the compacted table only moves when the
  mirror compacts, every 10 micro-batches by default, and Spark runs no micro-batch without new
  input), then a last sample; when the view shows it, the view is compared with Cassandra row
  for row (bench/spark_mirror_exact.py's comparison). Writes whose chunk took 2 s or more from
  its stamp to sent are counted (`writes_landed_late`; the longest, `write_landing_s_max`): then
  Kafka may lack them, the comparison says nothing about the mirror (`exact.void`).
- Then, over the same topics, `cdc-bridge spark flatten`, `history` and `mirror` (a new Delta
  root) each run with `--available-now` as their own processes: rows/s as the backlog benches
  count them (input records over the query's time, session start excluded).

Prints a line every ~10 s and one JSON object at the end (`--json-out FILE` writes it too).
Needs the local stack and `scripts/setup --spark`. Traffic goes to the stack's endpoints only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from latency_reader import percentile
from spark_flatten_backlog import CLI
from spark_flatten_backlog import _events as events_of
from spark_flatten_backlog import _run as run_cli
from spark_flatten_backlog import _timestamp as timestamp_of
from spark_mirror_backlog import _schemas
from spark_mirror_exact import cassandra_rows, frame_rows
from spark_mirror_exact import differences as row_differences
from worker_bench import properties, start_workers, stop_workers

from bench.results import _git_commit, add_record_flag, command_line, record
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.load import BULK_TABLE_COLUMNS, send_writes
from bridge_devstack.sim.mutation import Cell, PartitionMutation
from bridge_devstack.stack.manager import StackManager
from tests.spark.jobs import end_offsets, wait_settled

TABLE = "t"
MARKER = -1  # the samples' partition
ROWS_PER_PARTITION = 20
TICK_S = 0.1
MAX_TICK_WRITES = 1000  # a writer that fell behind catches up by at most this many writes a tick
WRITE_CHUNK = 100  # writes stamped and sent at a time (a catch-up tick is several chunks)
CONFIDENCE_MS = 2000  # the worker's confidence window (its default)
RECORDED = ("mirror_freshness_p50_s", "mirror_freshness_p99_s", "mirror_freshness_max_s",
            "mirror_compacted_freshness_p50_s", "mirror_compacted_freshness_p99_s", "spark_flatten_rows_per_s_same_run",
            "spark_history_rows_per_s_same_run", "spark_mirror_rows_per_s_same_run",
            "spark_mirror_flatten_ratio_same_run", "mirror_stage_write_kafka_p50_s", "mirror_stage_write_kafka_p99_s",
            "mirror_stage_kafka_appended_p50_s", "mirror_stage_kafka_appended_p99_s",
            "mirror_stage_appended_view_p50_s", "mirror_stage_appended_view_p99_s")
# the stages recorded (RECORDED's mirror_stage_<key>_p50_s, _p99_s) -> their names in the report
STAGE_KEYS = {"write_kafka": "write_to_kafka", "kafka_appended": "kafka_to_appended",
              "appended_view": "appended_to_view"}


@dataclass
class Writer:
    """Paced writes through the emulator; samples are new rows of the marker partition."""

    emu: Emulator
    keyspace: str
    rate: float
    sample_every: int
    partitions: int
    written: int = 0
    samples: dict[int, int] = field(default_factory=dict)  # sample number -> cdc$time (µs, wall clock)
    sampling: bool = True
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    began: float = 0.0
    ended: float = 0.0
    sampled_until: float = 0.0  # monotonic time the sampled phase ended
    sampled_writes: int = 0
    paced_from: int = 0  # writes done before the paced ones (warm-up)
    # Writes whose chunk was still being sent CONFIDENCE_MS after it was stamped: their log rows
    # may land behind the worker's read position, which never reads that time again.
    late_writes: int = 0
    landing_s_max: float = 0.0  # the longest a chunk took from its stamp to sent

    def write(self, count: int, sample_last: bool = False) -> None:
        """`count` writes, planned and sent in chunks of at most WRITE_CHUNK: each chunk's
        `cdc$time` is stamped when it is planned, just before it is sent, so a catch-up tick's
        last rows do not land seconds after their time (the worker would never read them)."""
        for first in range(0, count, WRITE_CHUNK):
            size = min(WRITE_CHUNK, count - first)
            self._write_chunk(size, sample_last and first + size == count)

    def _write_chunk(self, count: int, sample_last: bool) -> None:
        schema = self.emu.table(self.keyspace, TABLE).schema
        mutations = []
        stamped = self.emu.clock()
        for i in range(count):
            n = self.written + i
            sample = (self.sampling and n % self.sample_every == self.sample_every - 1) or \
                (sample_last and i == count - 1)
            if sample:
                number = len(self.samples)
                mutation = PartitionMutation(schema, (MARKER,))
                stamp = self.emu.clock()
                mutation.row((number,)).cells["v"] = Cell(stamp, value=n)
                self.samples[number] = stamp
            else:
                mutation = PartitionMutation(schema, (n % self.partitions,))
                row = (n // self.partitions) % ROWS_PER_PARTITION
                mutation.row((row,)).cells["v"] = Cell(self.emu.clock(), value=n)
            mutations.append(mutation)
        plan = self.emu.plan(mutations, base=True)
        send_writes(self.emu, [w for batch in plan.log_batches + plan.batches for w in batch], 64)
        landed_s = (self.emu.clock() - stamped) / 1e6
        self.landing_s_max = max(self.landing_s_max, landed_s)
        if landed_s * 1000 >= CONFIDENCE_MS:
            self.late_writes += count
        self.written += count

    def run_paced(self, seconds: float) -> None:
        """Sampled writes at `rate` for `seconds`, then unsampled ones until `stop` is set."""
        try:
            self.began = time.monotonic()
            start_n = self.paced_from = self.written
            while not self.stop.is_set():
                now = time.monotonic()
                if self.sampling and now - self.began >= seconds:
                    self.sampling, self.sampled_until, self.sampled_writes = False, now, self.written - start_n
                due = int((now - self.began) * self.rate) - (self.written - start_n)
                if due > 0:
                    self.write(min(due, MAX_TICK_WRITES))
                time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
            self.ended = time.monotonic()
        except BaseException as error:  # reported by the main thread
            self.error = error
            self.ended = time.monotonic()


def figures(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    return {"p50": round(percentile(values, 0.5), 2), "p99": round(percentile(values, 0.99), 2),
            "max": round(max(values), 2)}


class Poller:
    """The marker partition in the view and in the compacted table, polled from our own session."""

    def __init__(self, spark: Any, root: str, keyspace: str) -> None:
        self.spark, self.root, self.keyspace = spark, root, keyspace
        self.seen_view: dict[int, float] = {}  # sample -> wall time it was visible (s)
        self.seen_table: dict[int, float] = {}
        self.started_view: dict[int, float] = {}  # sample -> wall time the poll that showed it began
        self.started_table: dict[int, float] = {}
        self.poll_s: list[float] = []
        self.errors: list[str] = []

    def _markers(self, exact: bool) -> tuple[set[int], float, float]:
        from pyspark.sql import functions as F

        from bridge.spark.mirror.view import current_state

        began = time.time()
        if exact:
            frame = current_state(self.spark, self.root, self.keyspace, TABLE)
        else:
            frame = self.spark.read.format("delta").load(f"{self.root}/{self.keyspace}/{TABLE}")
        bound = time.time()  # both snapshots (table, changelog) are taken by now
        return {int(r[0]) for r in frame.where(F.col("pk") == MARKER).select("ck").collect()}, began, bound

    def poll(self, samples: dict[int, int]) -> None:
        began = time.monotonic()
        for exact, seen, started in ((True, self.seen_view, self.started_view),
                                     (False, self.seen_table, self.started_table)):
            if all(s in seen for s in list(samples)):
                continue
            try:
                found, began_at, bound = self._markers(exact)
            except Exception as error:  # no table yet (before the first compaction), or a race with one
                message = str(error).splitlines()[0][:200]
                if message not in self.errors:
                    self.errors.append(message)
                continue
            for sample in found:
                seen.setdefault(sample, bound)
                started.setdefault(sample, began_at)
        self.poll_s.append(time.monotonic() - began)

    def lags(self, samples: dict[int, int], seen: dict[int, float]) -> list[float]:
        return [seen[s] - samples[s] / 1e6 for s in samples if s in seen]


class Stages:
    """Where each sample's time went (the module's docstring): its Kafka record (read by a
    consumer of this process, from the topic's start), the micro-batch whose offsets hold it
    (Spark's checkpoint) and when that micro-batch appended table `t` (the mirror's log)."""

    def __init__(self, bootstrap: str, topic: str, checkpoint: Path, log: Path) -> None:
        self.topic, self.offsets, self.log = topic, checkpoint / "offsets", log
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fresh-stages-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False})
        self.assigned = False
        self.partitions: list[int] = []
        self.fetched = 0  # records read so far
        self.records: dict[int, tuple[int, int, float]] = {}  # sample -> (partition, offset, timestamp s)
        self.batches: dict[int, tuple[float, dict[int, int]]] = {}  # batch id -> (start s, end offsets)
        self.appended: dict[int, float] = {}  # batch id -> when it appended table t (s)

    def read(self, budget_s: float = 5.0) -> None:
        """The topic's records since the last call, up to its end or the first empty fetch (for at
        most `budget_s`), the checkpoint's micro-batches and the mirror's log."""
        if not self.assigned:
            self.partitions = list(self.consumer.list_topics(self.topic, timeout=30).topics[self.topic].partitions)
            self.consumer.assign([TopicPartition(self.topic, p, 0) for p in self.partitions])
            self.assigned = True
        # the topic's end now (a transaction's commit marker may follow its last record)
        ends = [self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)[1] - 1
                for p in self.partitions]
        deadline = time.monotonic() + budget_s
        while time.monotonic() < deadline:
            positions = self.consumer.position([TopicPartition(self.topic, p) for p in self.partitions])
            if all(position.offset >= end for position, end in zip(positions, ends, strict=True)):
                break
            messages = self.consumer.consume(2000, timeout=0.5)
            if not messages and self.fetched:  # none more now (an open transaction's wait for its commit)
                break
            self.fetched += len(messages)
            for message in messages:
                key = message.key()
                if message.error() is None and key and b'"pk":-' in key:
                    payload = json.loads(key)["payload"]
                    if payload["pk"] == MARKER:
                        self.records.setdefault(int(payload["ck"]), (int(message.partition() or 0),
                                                                     int(message.offset() or 0),
                                                                     message.timestamp()[1] / 1000))
        for path in self.offsets.iterdir() if self.offsets.exists() else ():
            if path.name.isdigit() and int(path.name) not in self.batches:  # Spark purges old ones: keep them
                lines = path.read_text().splitlines()
                if len(lines) >= 3:  # v1, the batch's metadata, one line per source
                    source = json.loads(lines[2]).get(self.topic, {})
                    self.batches[int(path.name)] = (json.loads(lines[1])["batchTimestampMs"] / 1000,
                                                    {int(p): int(o) for p, o in source.items()})
        for event in events_of(self.log) if self.log.exists() else ():
            if event.get("event") == "micro-batch mirrored" and event.get("table") == TABLE:
                self.appended.setdefault(int(event["batch_id"]), timestamp_of(event))

    def batch_of(self, partition: int, offset: int) -> int | None:
        """The first micro-batch whose end offset is past the record's."""
        return next((batch for batch in sorted(self.batches) if self.batches[batch][1].get(partition, 0) > offset),
                    None)

    def of(self, samples: dict[int, int], poller: Poller) -> dict[str, list[float]]:
        """Each stage's seconds over the samples that reached it."""
        stages: dict[str, list[float]] = {name: [] for name in (
            "write_to_kafka", "kafka_to_appended", "kafka_to_batch_start", "batch_start_to_appended",
            "appended_to_view", "appended_to_poll_start")}
        for sample, written in samples.items():
            if sample not in self.records:
                continue
            partition, offset, produced = self.records[sample]
            stages["write_to_kafka"].append(produced - written / 1e6)
            batch = self.batch_of(partition, offset)
            if batch is None or batch not in self.appended:
                continue
            appended, started = self.appended[batch], self.batches[batch][0]
            stages["kafka_to_appended"].append(appended - produced)
            stages["kafka_to_batch_start"].append(started - produced)
            stages["batch_start_to_appended"].append(appended - started)
            if sample in poller.seen_view:
                stages["appended_to_view"].append(poller.seen_view[sample] - appended)
                stages["appended_to_poll_start"].append(poller.started_view[sample] - appended)
        return stages

    def line(self, samples: dict[int, int], poller: Poller) -> str:
        """The three stages' p50/p99 for the periodic line."""
        found = {name: figures(values) for name, values in self.of(samples, poller).items()}
        return ", ".join(f"{short} {found[name]['p50']}/{found[name]['p99']}" for short, name in (
            ("kafka", "write_to_kafka"), ("appended", "kafka_to_appended"), ("view", "appended_to_view")))

    def close(self) -> None:
        self.consumer.close()


def run_available_now(job: str, args: list[str], folder: Path) -> dict[str, Any]:
    """One documented job with --available-now as its own process; rows/s as the backlog benches
    count them (input rows over the query's start to its last micro-batch or compaction)."""
    CLI[-1] = job
    log = folder / f"{job}-available-now.log"
    run = run_cli([*args, "--available-now"], log, timeout_s=3600)
    events = events_of(log)
    batches = [e for e in events if e.get("event") == "micro-batch done" and "rows" in e]
    started = next((e for e in events if e.get("event") == "query started"), None)
    rows = sum(int(b["rows"]) for b in batches)
    result: dict[str, Any] = {"command": f"cdc-bridge spark {job} " + " ".join(args) + " --available-now", **run,
                              "input_records": rows, "micro_batches": len(batches),
                              "error_lines": [line for line in log.read_text(errors="replace").splitlines()
                                              if line.startswith("error: ")]}
    if batches and started:
        compactions = [timestamp_of(e) for e in events if e.get("event") == "mirror compacted"]
        query_s = max([timestamp_of(batches[-1]), *compactions]) - timestamp_of(started)
        result.update({"query_s": round(query_s, 1), "rows_per_s": round(rows / query_s)})
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=2000, help="writes per second")
    parser.add_argument("--duration", type=float, default=300, help="seconds of sampled writes")
    parser.add_argument("--sample-every", type=int, default=200, help="one write in N is a sample")
    parser.add_argument("--partitions", type=int, default=1000, help="of the unsampled writes (20 rows each)")
    parser.add_argument("--poll-s", type=float, default=0.5, help="pause between two polls")
    parser.add_argument("--drain-timeout", type=float, default=180, help="after the sampled writes: at most this "
                        "long until every sample is seen in the view and the compacted table")
    parser.add_argument("--no-available-now", action="store_true", help="skip the flatten/history/mirror "
                        "--available-now runs over the topics")
    parser.add_argument("--keep-keyspace", action="store_true")
    parser.add_argument("--json-out", type=Path, help="also write the JSON report here")
    add_record_flag(parser)
    args = parser.parse_args()

    from bridge.spark.core.session import build_session

    endpoints = StackManager.default().endpoints
    load_start = os.getloadavg()
    folder = Path(tempfile.mkdtemp(prefix="spark-mirror-freshness-"))
    keyspace = f"fresh_{uuid.uuid4().hex[:8]}"
    name = f"fresh-{uuid.uuid4().hex[:8]}"
    topic = f"{name}.{keyspace}.{TABLE}"
    root = folder / "mirror"
    config = folder / "worker.properties"
    config.write_text(properties(endpoints, name, f"{keyspace}.{TABLE}", "json", CONFIDENCE_MS, extra=_schemas("json")))
    documented = ["--config", str(config), "--checkpoint", str(folder / "checkpoint"), "--delta", str(root)]
    report: dict[str, Any] = {
        "bench": "spark_mirror_freshness", "rate_target": args.rate, "duration_s": args.duration,
        "sample_every": args.sample_every, "keyspace": keyspace, "topic": topic, "folder": str(folder),
        "mirror_command": "cdc-bridge spark mirror " + " ".join(documented),
        "machine": {"cores": os.cpu_count(), "load_average_start": [round(x, 2) for x in load_start],
                    "commit": _git_commit()},
    }
    print(f"freshness: keyspace {keyspace}, topic {topic}, folder {folder}", file=sys.stderr, flush=True)
    emu = Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port)
    emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                "'replication_factor': 1}")
    workers: list[Any] = []
    mirror_stop = threading.Event()
    mirror_run: dict[str, Any] = {}
    mirror_thread: threading.Thread | None = None
    spark = None
    stages: Stages | None = None
    writer = Writer(emu, keyspace, args.rate, args.sample_every, args.partitions)
    try:
        emu.execute(f"CREATE TABLE {keyspace}.{TABLE} ({BULK_TABLE_COLUMNS}) WITH cdc = {{'enabled': true}}")
        workers = start_workers(config, 1, folder)
        # warm-up: the topic exists before the mirror subscribes; not measured
        writer.sampling = False
        deadline = time.monotonic() + 120
        while sum(end_offsets(endpoints.kafka_bootstrap, [topic]).values()) == 0 and time.monotonic() < deadline:
            writer.write(10)
            time.sleep(1)
        CLI[-1] = "mirror"
        log = folder / "mirror.log"
        mirror_thread = threading.Thread(target=lambda: mirror_run.update(
            run_cli(documented, log, until=mirror_stop.is_set, timeout_s=3 * 3600)), daemon=True)
        mirror_thread.start()
        spark = build_session("local[1]", app_name="cdc-bridge-bench-freshness")
        poller = Poller(spark, str(root), keyspace)
        stages = Stages(endpoints.kafka_bootstrap, topic, folder / "checkpoint", log)
        # warm-up, not measured: a trickle of writes until the mirror has done two micro-batches
        # (the first in a fresh checkpoint is slower) and this session has read both sides once
        began = time.monotonic()
        while time.monotonic() - began < 300 and (not log.exists() or sum(
                1 for e in events_of(log) if e.get("event") == "micro-batch done") < 2):
            if not mirror_thread.is_alive():
                raise RuntimeError(f"the mirror exited: see {log}")
            writer.write(10)
            time.sleep(1)
        report["mirror_start_s"] = round(time.monotonic() - began, 1)
        poller.poll({-1: 0})
        poller.poll_s.clear()
        writer.sampling = True
        paced = threading.Thread(target=writer.run_paced, args=(args.duration,), daemon=True)
        paced.start()
        last_line = time.monotonic()
        drain_deadline = None
        while True:
            poller.poll(writer.samples)
            samples = dict(writer.samples)
            now = time.monotonic()
            if writer.error is not None:
                raise RuntimeError(f"the writer failed: {writer.error!r}")
            if not mirror_thread.is_alive():
                raise RuntimeError(f"the mirror exited: see {log}")
            if not writer.sampling:
                drain_deadline = drain_deadline or now + args.drain_timeout
                everything = all(s in poller.seen_view and s in poller.seen_table for s in samples)
                if everything or now >= drain_deadline:
                    break
            if now - last_line >= 10:
                last_line = now
                stages.read()
                unseen = [samples[s] for s in samples if s not in poller.seen_view]
                lag = time.time() - min(unseen) / 1e6 if unseen else 0.0
                done = writer.written - writer.paced_from
                print(f"[{now - writer.began:5.0f} s] writes {done} ({done / (now - writer.began):.0f}/s) "
                      f"samples {len(samples)} seen: view {len(poller.seen_view)} compacted "
                      f"{len(poller.seen_table)}; oldest unseen in view {lag:.1f} s; "
                      f"last poll {poller.poll_s[-1]:.1f} s; stages p50/p99 s: {stages.line(samples, poller)}; "
                      f"load {os.getloadavg()[0]:.1f}",
                      file=sys.stderr, flush=True)
            time.sleep(args.poll_s)
        sampled = {s: t for s, t in writer.samples.items()}
        writer.stop.set()
        paced.join(60)
        # every write in Kafka, then one more sample: the micro-batch that reads it reads every
        # partition up to its end, so when the view shows it, it holds every write
        wait_settled(endpoints.kafka_bootstrap, [topic], timeout_s=120)
        writer.write(1, sample_last=True)
        final = max(writer.samples)
        deadline = time.monotonic() + 120
        while final not in poller.seen_view and time.monotonic() < deadline:
            poller.poll(writer.samples)
            time.sleep(args.poll_s)
        view_lags = poller.lags(sampled, poller.seen_view)
        table_lags = poller.lags(sampled, poller.seen_table)
        achieved = writer.sampled_writes / max(1e-9, writer.sampled_until - writer.began)
        view, table = figures(view_lags), figures(table_lags)
        report["mirror_freshness_from_poll_start_s"] = figures(poller.lags(sampled, poller.started_view))
        report["mirror_compacted_freshness_from_poll_start_s"] = figures(poller.lags(sampled, poller.started_table))
        report.update({
            "writes": writer.written, "writes_sampled_phase": writer.sampled_writes,
            "writes_landed_late": writer.late_writes, "write_landing_s_max": round(writer.landing_s_max, 2),
            "rate_achieved": round(achieved), "rate_sustained": achieved >= 0.95 * args.rate,
            "samples": len(sampled), "samples_seen_view": len(view_lags), "samples_seen_compacted": len(table_lags),
            "final_sample_seen": final in poller.seen_view,
            "mirror_freshness_p50_s": view["p50"], "mirror_freshness_p99_s": view["p99"],
            "mirror_freshness_max_s": view["max"],
            "mirror_compacted_freshness_p50_s": table["p50"], "mirror_compacted_freshness_p99_s": table["p99"],
            "mirror_compacted_freshness_max_s": table["max"],
            "polls": len(poller.poll_s), "poll_s": {"median": round(statistics.median(poller.poll_s), 2),
                                                   "max": round(max(poller.poll_s), 2)},
            "poll_errors": poller.errors[:5],
        })
        # the view against Cassandra, row for row (all writes are in Kafka and the view by now)
        from bridge.spark.mirror.view import current_state

        report["exact"] = row_differences(cassandra_rows(emu.session, keyspace, TABLE),
                                          frame_rows(current_state(spark, str(root), keyspace, TABLE)))
        if writer.late_writes:
            # not the mirror's doing: the worker may have skipped these writes, so Kafka lacks them
            report["exact"]["void"] = (f"{writer.late_writes} writes landed {CONFIDENCE_MS} ms or more after their "
                                       "cdc$time: the worker may never have read them")
        mirror_stop.set()
        mirror_thread.join(180)
        events = events_of(log)
        batches = [e for e in events if e.get("event") == "micro-batch done" and "rows" in e]
        compactions = [e for e in events if e.get("event") == "mirror compacted"]
        rows = sum(int(b["rows"]) for b in batches)
        busy = sum(float(b["duration_s"]) for b in batches)
        report["streaming_mirror"] = {
            **mirror_run, "micro_batches": len(batches), "rows": rows,
            "rows_per_busy_s": round(rows / busy) if busy else None,
            "batch_s": {"median": statistics.median(b["duration_s"] for b in batches),
                        "max": max(b["duration_s"] for b in batches)} if batches else None,
            "compactions": len(compactions),
            "compaction_s": {"median": statistics.median(e["seconds"] for e in compactions),
                             "max": max(e["seconds"] for e in compactions)} if compactions else None,
        }
        try:
            stages.read(budget_s=300)
        except Exception as error:  # the stages explain the figures above, which stand without them
            report["mirror_freshness_stages_error"] = str(error)[:200]
        staged = stages.of(sampled, poller)
        report["mirror_freshness_stages"] = {
            "samples_in_kafka": len(stages.records), "micro_batches_mapped": len(stages.batches),
            **{name: figures(values) for name, values in staged.items()}}
        for key, name in STAGE_KEYS.items():
            found = figures(staged[name])
            report.update({f"mirror_stage_{key}_p50_s": found["p50"], f"mirror_stage_{key}_p99_s": found["p99"]})
    finally:
        writer.stop.set()
        mirror_stop.set()
        if mirror_thread is not None:
            mirror_thread.join(180)
        if spark is not None:
            spark.stop()
        if stages is not None:
            stages.close()
        if workers:
            stop_workers(workers)
    report["load_average_after_steady"] = [round(x, 2) for x in os.getloadavg()]
    if not args.no_available_now:
        inputs = sum(end_offsets(endpoints.kafka_bootstrap, [topic]).values())
        config_args = ["--config", str(config)]
        jobs = {
            "flatten": [*config_args, "--checkpoint", str(folder / "ck-flatten"), "--output-topic", "{topic}.flat"],
            "history": [*config_args, "--checkpoint", str(folder / "ck-history"), "--output", str(folder / "history")],
            "mirror": [*config_args, "--checkpoint", str(folder / "ck-mirror"), "--delta", str(folder / "mirror-an")],
        }
        report["available_now"] = {"input_offsets_incl_markers": inputs}
        for job, job_args in jobs.items():
            print(f"freshness: {job} --available-now over {topic}", file=sys.stderr, flush=True)
            report["available_now"][job] = run_available_now(job, job_args, folder)
        rates = {job: report["available_now"][job].get("rows_per_s") for job in jobs}
        report.update({"spark_flatten_rows_per_s_same_run": rates["flatten"],
                       "spark_history_rows_per_s_same_run": rates["history"],
                       "spark_mirror_rows_per_s_same_run": rates["mirror"],
                       "spark_mirror_flatten_ratio_same_run":
                           round(rates["mirror"] / rates["flatten"], 2) if rates["mirror"] and rates["flatten"]
                           else None})
    if not args.keep_keyspace:
        emu.session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    emu.close()
    report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    text = json.dumps(report, indent=1, default=str)
    print(text, flush=True)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    if args.record:
        loads = report["machine"]
        keys = {k: report[k] for k in RECORDED if isinstance(report.get(k), int | float)}
        record(keys, command_line(), bench="spark_mirror_freshness",
               note=f"writer reached {report.get('rate_achieved')} of {args.rate:.0f} writes/s; 1/5/15-min load "
                    f"{loads['load_average_start']} at start, {report['load_average_after_steady']} after the "
                    f"steady phase, {loads['load_average_end']} at the end; view polls median "
                    f"{report.get('poll_s', {}).get('median')} s")
    lost = report.get("samples_seen_view") != report.get("samples") or not report.get("final_sample_seen")
    return 1 if lost or report.get("exact", {}).get("differing") else 0


if __name__ == "__main__":
    sys.exit(main())
