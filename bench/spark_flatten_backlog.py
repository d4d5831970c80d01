"""Flatten alone over a big backlog, with the documented command and its defaults
(`bench/spark_bench.py --flatten-backlog N`).

A `bridge_devstack.sim` realistic backlog of N changes (bench/worker_bench.py's fill; `--keyspace` reuses a
filled one) is carried to Kafka by a real worker writing JSON with schemas (or Avro with
`--converter avro`); then `cdc-bridge spark flatten --config F --checkpoint D --output-topic
'{topic}.flat' --available-now` runs as its own process with no tuning flag. Measured:

- overall rows/s: input records over the query's time (from the query's start to the end of its
  last micro-batch, the JVM's and session's start excluded and reported apart);
- steady rows/s: the micro-batches after the first (rows over their summed durations);
- per-micro-batch overhead: a 1-record micro-batch (one envelope copied into the source topic)
  and an "empty" one (a Debezium tombstone, which the default options flatten to nothing), each
  the duration Spark reports for it, in a second, continuously triggered run on the same
  checkpoint; median of three each, the 1-record ones after the first (the first apart:
  `first_record_batch_s`, in the mirror's fresh root the micro-batch that creates its tables);
- peak driver memory: the JVM's peak RSS (VmHWM) and its heap setting; whether an
  OutOfMemoryError happened;
- exactness: the output topics' records read read_committed against the count expected from the
  source topics (every envelope of the default options: a delete gives a null-payload record,
  a Debezium tombstone nothing).
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
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker_bench import catchup, properties

from tests.spark.jobs import end_offsets, read_committed

CLI = [sys.executable, "-m", "bridge.cli", "spark", "flatten"]


def use_cluster(master: str, cores: int) -> None:
    """Run the jobs through docs/spark.md's spark-submit command on a standalone cluster (`cdc-bridge
    stack up --spark-cluster`), the application given `cores` cores (`spark.cores.max`: one core
    is one of the stack's two 1-core workers)."""
    from bridge.spark import __main__ as entry
    from bridge.spark.core.session import ivy_dir, packages

    CLI[:] = [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
              "--packages", ",".join(packages()), "--conf", f"spark.jars.ivy={ivy_dir()}",
              "--conf", f"spark.pyspark.python={sys.executable}", "--conf", f"spark.cores.max={cores}",
              "--driver-java-options", "-XX:+ExitOnOutOfMemoryError", str(entry.__file__), CLI[-1]]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def _java_pid(parent: int) -> int | None:
    """The JVM pyspark started under the job's process (its child `java`)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if (int(entry.name) == parent or int(stat.rsplit(")", 1)[1].split()[1]) == parent) \
                and b"java" in cmd.split(b"\0")[0]:  # spark-submit: the process is the JVM
            return int(entry.name)
    return None


def _peak_rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _group_cpu_s(pgid: int, seen: dict[int, float]) -> None:
    """CPU seconds (user + system) so far of every process of the job's process group (the Python
    driver, its JVM, the Python workers), kept per pid in `seen` (a process that exited keeps its
    last sample)."""
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            seen[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks


def _run(args: list[str], log: Path, until: Any = None, timeout_s: float = 3600) -> dict[str, Any]:
    """Run the flatten CLI; returns exit code, wall time, the CPU seconds of its processes and the
    JVM's peak RSS (sampled every 0.5 s until exit)."""
    began = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen([*CLI, *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    peak, java = None, None
    cpu: dict[int, float] = {}
    try:
        while process.poll() is None and time.monotonic() - began < timeout_s:
            java = java or _java_pid(process.pid)
            peak = _peak_rss_mb(java) or peak
            _group_cpu_s(process.pid, cpu)
            if until is not None and until():
                break
            time.sleep(0.5)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 15)
            process.wait(120)
    return {"exit": process.returncode, "wall_s": round(time.monotonic() - began, 1), "jvm_peak_rss_mb": peak,
            "cpu_s": round(sum(cpu.values()), 1)}


def _events(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def _timestamp(event: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def flatten_backlog(endpoints: Any, changes: int, keyspace: str | None, converter: str,
                    extra: list[str] | None = None, topics_from: list[str] | None = None) -> dict[str, Any]:
    """`extra`: flags added to the documented command (tuning experiments; none by default);
    `topics_from`: an earlier run's topics (a worker's `<name>.<keyspace>.<table>` topics and its
    dropped-changes topic, last, as bench/spark_mirror_backlog.py reports them) instead of a
    backlog filled and carried now."""
    CLI[-1] = "flatten"  # after a mirror run in the same process (spark_bench.py --with-flatten)
    schemas = {"value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true"} \
        if converter == "json" else {}
    if topics_from:
        topics = list(topics_from)
        carried: dict[str, Any] = {"keyspace": topics[0].split(".")[1], "changes": changes or None}
    else:
        carried = catchup(SimpleNamespace(keyspace=keyspace, changes=changes, mix="realistic", converter=converter,
                                          workers=1, timeout=1800, profile=None, profile_gil=False,
                                          settings=schemas), endpoints)
        topics = list(carried["topics"])
    name = topics[0].split(".")[0]
    tables = [t.split(".", 1)[1] for t in topics if not t.endswith(".dropped")]
    settings = dict(schemas)
    if topics[-1].endswith(".dropped"):  # the job reads it too
        settings["dropped.changes.topic"] = topics[-1]
    folder = Path(tempfile.mkdtemp(prefix="spark-flatten-bench-"))
    config = folder / "worker.properties"
    config.write_text(properties(endpoints, name, ",".join(tables), converter, 2000, extra=settings))
    inputs = sum(end_offsets(endpoints.kafka_bootstrap, topics).values())
    checkpoint = folder / "checkpoint"
    documented = ["--config", str(config), "--checkpoint", str(checkpoint), "--output-topic", "{topic}.flat"]
    documented += extra or []
    catch = _run([*documented, "--available-now"], folder / "catchup.log")
    events = _events(folder / "catchup.log")
    batches = [e for e in events if e.get("event") == "micro-batch done" and "rows" in e]
    started = next((e for e in events if e.get("event") == "query started"), None)
    rows = sum(int(b["rows"]) for b in batches)
    result: dict[str, Any] = {
        "bench": "spark_flatten_backlog", "converter": converter, "schemas": converter == "json",
        "keyspace": carried["keyspace"], "backlog_changes": carried["changes"], "input_records": rows,
        "input_offsets_incl_markers": inputs, "worker_envelopes_per_s": carried.get("envelopes_per_s"),
        "command": "cdc-bridge spark flatten " + " ".join(documented) + " --available-now", **catch,
        "micro_batches": len(batches),
        "oom": "OutOfMemoryError" in (folder / "catchup.log").read_text(errors="replace"),
        "error_lines": [line for line in (folder / "catchup.log").read_text(errors="replace").splitlines()
                        if line.startswith("error: ")],
    }
    if batches and started:
        query_s = _timestamp(batches[-1]) - _timestamp(started)
        steady = batches[1:] or batches
        result.update({
            "session_start_s": round(_timestamp(started) - (time.time() - catch["wall_s"]), 1),
            "query_s": round(query_s, 1), "rows_per_s_overall": round(rows / query_s),
            "rows_per_cpu_s": round(rows / catch["cpu_s"]) if catch["cpu_s"] else None,
            "rows_per_s_steady": round(sum(b["rows"] for b in steady) / sum(b["duration_s"] for b in steady)),
            "batch_s": {"first": batches[0]["duration_s"],
                        "median": statistics.median(b["duration_s"] for b in batches),
                        "max": max(b["duration_s"] for b in batches)},
            "rows_per_batch_max": max(b["rows"] for b in batches),
        })
    result["output"] = _exactness(endpoints, topics, converter)
    result["overhead"] = _overhead(endpoints, documented, topics[0], folder)
    result["load_average"] = os.getloadavg()
    return result


def _exactness(endpoints: Any, topics: list[str], converter: str) -> dict[str, Any]:
    """Default options (delete.tombstone.handling.mode=tombstone): each envelope gives one record,
    Debezium tombstones none; so the expected output is the source's non-null values."""
    expected = got = 0
    for topic in topics:
        source = read_committed(endpoints.kafka_bootstrap, topic, timeout_s=600)
        expected += sum(1 for _key, value in source if value is not None)
        got += len(read_committed(endpoints.kafka_bootstrap, f"{topic}.flat", timeout_s=600))
    return {"expected": expected, "got": got, "exact": expected == got}


def _overhead(endpoints: Any, documented: list[str], topic: str, folder: Path) -> dict[str, Any]:
    """Micro-batches of one record and of one tombstone in a continuously triggered run."""
    consumer = Consumer({"bootstrap.servers": endpoints.kafka_bootstrap, "group.id": f"b-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    sample = None
    while sample is None:
        message = consumer.poll(10)
        if message is not None and message.error() is None and message.value() is not None:
            sample = message
    consumer.close()
    assert sample is not None
    producer = Producer({"bootstrap.servers": endpoints.kafka_bootstrap})
    log = folder / "overhead.log"
    plan = ["record", "tombstone"] * 3
    sent: list[str] = []

    def feed() -> bool:
        events = _events(log)
        done = [e for e in events if e.get("event") == "micro-batch done" and "rows" in e]
        if any(e.get("event") == "query started" for e in events) and len(done) >= len(sent):
            if len(sent) == len(plan):
                return True
            kind = plan[len(sent)]
            producer.produce(topic, key=sample.key(), value=sample.value() if kind == "record" else None,
                             partition=sample.partition())
            producer.flush(30)
            sent.append(kind)
        return False

    run = _run([*documented, "--trigger-interval", "1 second"], log, until=feed, timeout_s=600)
    done = [e for e in _events(log) if e.get("event") == "micro-batch done" and "rows" in e]
    by_kind: dict[str, list[float]] = {"record": [], "tombstone": []}
    for kind, event in zip(sent, done, strict=False):
        if event["rows"] == 1:
            by_kind[kind].append(event["duration_s"])
    # the first 1-record micro-batch of the run (into a fresh mirror: the one that creates its
    # tables) apart from the warm ones after it
    records = by_kind["record"]
    return {"one_record_batch_s": statistics.median(records[1:] or records) if records else None,
            "first_record_batch_s": records[0] if records else None,
            "empty_output_batch_s": statistics.median(by_kind["tombstone"]) if by_kind["tombstone"] else None,
            "samples": by_kind, "run": run,
            "note": "Spark runs no micro-batch without new input (Kafka source, stateless query): an idle job "
                    "costs its trigger's offset polls only; the empty-output batch is one Debezium tombstone, "
                    "which the default options drop"}

