"""Real `cdc-bridge spark ...` processes for tests: start, SIGKILL (its own process group), progress
from the checkpoint, and waiting for the worker's topics to settle."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.offsets_topic import OffsetsTopic
from bridge.scylla.positions import Position

CLI = [sys.executable, "-m", "bridge.cli", "spark"]
# The tests' JVMs live a few minutes: JIT compiling with C1 only spares the 2 cores C2's work
# (bench/spark_bench.py, 5,559 records, one micro-batch: mirror 67 s and 51 s with C2, 43 s and
# 39 s without; flatten 17 s and 12 s either way). Not a product default: a long-running job
# wants C2's code.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


@dataclass
class SparkJob:
    process: subprocess.Popen[bytes]
    log_path: Path
    checkpoint: Path

    def committed_batches(self) -> int:
        commits = self.checkpoint / "commits"
        return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0

    def planned_batches(self) -> int:
        offsets = self.checkpoint / "offsets"
        return len([p for p in offsets.iterdir() if p.name.isdigit()]) if offsets.exists() else 0

    def kill(self) -> None:
        """SIGKILL the job's process group (the Python driver and its JVM), started by us."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"spark job still running after {timeout_s} s; log: {self.tail()}") from None

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


# Spark's or Ivy's console output: a log4j line (`26/11/28 23:56:16 WARN Utils: ...`), a Java stack
# frame or exception, Ivy's resolution, the JVM's own warnings
SPARK_CONSOLE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|ERROR|INFO)|^\s+at [\w$.]+\(|Exception in thread|"
                           r"^Caused by: |:: resolving dependencies|Ivy Default Cache|^\s+found \S+#|^WARNING: ")


def assert_console_is_ours(job: SparkJob) -> Path:
    """A finished job's console (stdout and stderr) holds only our structured lines, one of them
    naming the file Spark's own output went to, which holds it; returns that file."""
    lines = job.log_path.read_text(errors="replace").splitlines()
    spark = [line for line in lines if SPARK_CONSOLE.search(line)]
    assert spark == [], f"Spark's or Ivy's lines on the console: {spark[:5]}"
    ours = []
    for line in lines:
        try:
            ours.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not one of our log lines: {line!r}") from None
    paths = [entry["path"] for entry in ours if entry.get("event", "").startswith("spark's own output goes to a file")]
    assert len(paths) == 1, f"the Spark log's path should be told once: {paths}"
    text = Path(paths[0]).read_text(errors="replace")
    # Spark's warnings; Ivy's resolution lines only where the session resolved the packages (session.py)
    assert re.search(r" WARN \w+: ", text), f"no Spark output in {paths[0]}"
    return Path(paths[0])


def start_job(args: list[str], log_dir: Path, checkpoint: Path, env: dict[str, str] | None = None) -> SparkJob:
    """`env`: more environment variables for the job (e.g. the test-only fault of kafka_tasks)."""
    log_path = log_dir / f"spark-{uuid.uuid4().hex[:6]}.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen([*CLI, *args, "--checkpoint", str(checkpoint),
                                    "--spark-conf", f"spark.driver.extraJavaOptions={TEST_JVM_OPTIONS}"], stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, **env} if env else None)
    return SparkJob(process, log_path, checkpoint)


def wait_until(condition: object, timeout_s: float, what: str, job: SparkJob | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        if job is not None and job.process.poll() is not None:
            raise AssertionError(f"spark job exited ({job.process.returncode}) before {what}: {job.tail()}")
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}" + (f": {job.tail()}" if job else ""))


def end_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:8]}"})
    try:
        found = {}
        metadata = consumer.list_topics(timeout=30)
        for topic in topics:
            if topic not in metadata.topics:
                continue
            for partition in metadata.topics[topic].partitions:
                found[(topic, partition)] = _high_watermark(consumer, TopicPartition(topic, partition))
        return found
    finally:
        consumer.close()


def _high_watermark(consumer: Consumer, partition: TopicPartition) -> int:
    """A topic the worker has just created may not have its leader yet: retry that for a while."""
    for attempt in range(20):
        try:
            return int(consumer.get_watermark_offsets(partition, timeout=30)[1])
        except KafkaException as error:
            if attempt == 19 or ("NOT_LEADER" not in str(error) and "LEADER_NOT_AVAILABLE" not in str(error)):
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def read_committed(bootstrap: str, topic: str, timeout_s: float = 120.0) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every committed record of `topic`, read until the position reaches the end
    offsets. The end offsets count transaction markers too, so they are no record count to wait
    for (waiting for that many records ran into read_topic's 90 s timeout on every topic)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        partitions = list(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        watermarks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions}
        ends = {p: high for p, (low, high) in watermarks.items() if high > low}  # empty partitions: nothing to wait for
        partitions = list(ends)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout_s
        while any(position.offset < ends[position.partition]
                  for position in consumer.position([TopicPartition(topic, p) for p in partitions])):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: not read to its end offsets {ends} within {timeout_s} s")
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is None:
                    messages.append((message.key(), message.value()))
        return messages
    finally:
        consumer.close()


def wait_settled(bootstrap: str, topics: list[str], timeout_s: float = 180.0, quiet_s: float = 6.0) -> None:
    """Until the topics' end offsets stop moving for `quiet_s` (the worker delivered everything)."""
    deadline = time.monotonic() + timeout_s
    last, since = end_offsets(bootstrap, topics), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = end_offsets(bootstrap, topics)
        if now != last:
            last, since = now, time.monotonic()
        elif sum(now.values()) > 0 and time.monotonic() - since >= quiet_s:
            return
    raise AssertionError(f"topics {topics} still growing after {timeout_s} s")


def wait_delivered(bootstrap: str, name: str, groups: set[str], since_us: int, timeout_s: float = 300.0) -> None:
    """Until every one of `groups` (as the workers log them) has committed a streaming position
    at or past `since_us` in the offsets topic `<name>-offsets`: everything written before then
    is in the topics. Exact where `wait_settled` only guesses from a pause in the topics' growth."""
    deadline = time.monotonic() + timeout_s
    offsets = OffsetsTopic({"bootstrap.servers": bootstrap}, f"{name}-offsets", name)
    behind, problem = sorted(groups), ""
    try:
        offsets.start()
        while True:
            try:  # what is committed now: an open transaction's positions come at a later turn
                offsets.catch_up(timeout_s=30, committed_only=True)
            except KafkaUnavailableError as error:  # a broker started a moment ago: the next turn asks again
                problem = f"; last read: {error}"
            else:
                committed = {str(group): position for group, position in offsets.positions.items()}
                behind = sorted(g for g in groups if not _streams_past(committed.get(g), since_us))
                if not behind:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(behind)} groups, e.g. {behind[:3]}, not committed past {since_us}{problem}")
            time.sleep(1.0)
    finally:
        offsets.close()


def _streams_past(position: Position | None, since_us: int) -> bool:
    return position is not None and position.snapshot is None and position.window_start_us >= since_us


def submit_command(master: str, args: list[str]) -> list[str]:
    """docs/spark.md's spark-submit command line ("On a standalone cluster"): the packages as
    `cdc-bridge spark packages` prints them, from the Ivy cache `scripts/setup --spark` filled,
    the driver and the executors on this venv's Python (which has `bridge` and the `spark` extra).
    The tests' JVMs compile with C1 only (TEST_JVM_OPTIONS) and serve no UI; two shuffle
    partitions and Delta snapshot partitions suit the 2-core cluster."""
    from bridge.spark import __main__ as entry
    from bridge.spark.core.session import ivy_dir, packages

    return [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
            "--packages", ",".join(packages()), "--conf", f"spark.jars.ivy={ivy_dir()}",
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--driver-java-options", f"-XX:+ExitOnOutOfMemoryError {TEST_JVM_OPTIONS}",
            "--conf", f"spark.executor.extraJavaOptions={TEST_JVM_OPTIONS}",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.databricks.delta.snapshotPartitions=2",
            str(entry.__file__), *args]


def submit_job(master: str, args: list[str], log_dir: Path, checkpoint: Path) -> SparkJob:
    """spark-submit in client mode (the driver here, the executors on the cluster's workers). Ivy
    resolves `--packages` inside spark-submit, before the driver starts: that holds the Ivy
    cache's lock (bridge/spark/core/session.py) until the driver's SparkContext starts."""
    from bridge.spark.core.session import ivy_lock

    log_path = log_dir / f"spark-submit-{uuid.uuid4().hex[:6]}.log"
    # spark-submit finds SPARK_HOME with the first python on PATH: this venv's, as when it is active
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with ivy_lock(), log_path.open("wb") as out:
        process = subprocess.Popen(submit_command(master, [*args, "--checkpoint", str(checkpoint)]), stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True, env=env)
        job = SparkJob(process, log_path, checkpoint)
        deadline = time.monotonic() + 600
        while "Running Spark version" not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    return job
