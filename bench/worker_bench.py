"""The worker end to end (`cdc-bridge run` processes, exactly-once on), on the local stack.

    .venv/bin/python bench/worker_bench.py catchup [--changes 200000] [--converter json] [--workers 1]
    .venv/bin/python bench/worker_bench.py latency [--rate 1000] [--seconds 30]

`catchup`: fills a fresh keyspace with N changes (the emulator's bulk mode, log rows only;
`--keyspace` reuses a filled one), then starts the workers with no offsets and times until a
read_committed consumer has every Kafka record the bridge must produce for them. `--mix narrow`
(the default): N single-row updates of table `t` (pk, ck, v int), one envelope each.
`--mix realistic`: `bridge_devstack.sim.backlog` (tables `wide`, ten mixed-type columns, and `imaged`,
pre-images on and `experimental.preimages.enabled`): inserts, partial updates, collection
changes, deletes (an envelope and a tombstone each), multi-row records, range and partition
deletes (dropped, no envelope); the expected count is computed from the records written and kept
in the keyspace (table `backlog_fill`) for `--keyspace`. Reports envelopes/s, the workers' CPU
seconds (user+sys from `getrusage` of the exited children) and envelopes per CPU-second, and their
peak RSS.

`latency`: one worker reads a table that gets `rate` one-row writes per second (log rows written
directly, as bench/latency_reader.py does); for every envelope a read_committed consumer gets,
`(arrival - cdc$time) - confidence window`: p50/p99/max in ms.

Prints one JSON object. Run on an idle machine; Kafka and Cassandra share its cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from bridge_devstack.sim import Emulator
from bridge_devstack.sim.backlog import realistic_fill
from bridge_devstack.sim.load import bulk_fill
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.stack.layout import Endpoints, StackLayout

sys.path.insert(0, str(Path(__file__).parent))
from latency_reader import percentile, write_log_rows_steadily


def properties(endpoints: Endpoints, name: str, table: str, converter: str, confidence_ms: int,
               preimages: bool = False, lookback_ms: int = 3_600_000,
               extra: dict[str, str] | None = None) -> str:
    sim = SimSettings()
    lines: dict[str, object] = {
        "name": name, "topic.prefix": name, "scylla.table.names": table,
        "scylla.cluster.ip.addresses": f"{endpoints.cassandra_host}:{endpoints.cassandra_port}",
        "scylla.confidence.window.size": confidence_ms, "scylla.initial.lookback.ms": lookback_ms,
        "scylla.cdc.metadata.vnodes.keyspace": sim.vnodes_keyspace,
        "scylla.cdc.metadata.tablets.keyspace": sim.tablets_keyspace,
        "key.converter": converter, "value.converter": converter,
        "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
        "key.converter.schema.registry.url": endpoints.schema_registry_url,
        "value.converter.schema.registry.url": endpoints.schema_registry_url,
        "kafka.bootstrap.servers": endpoints.kafka_bootstrap, "metrics.port": 0,
    }
    if converter == "json":
        del lines["key.converter.schema.registry.url"], lines["value.converter.schema.registry.url"]
    if preimages:
        lines["experimental.preimages.enabled"] = "true"
    lines.update(extra or {})
    return "".join(f"{key}={value}\n" for key, value in lines.items())


# installed beside this interpreter by `scripts/setup` (the dev extra), whether or not the venv is on PATH
PY_SPY = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"


def start_workers(config: Path, count: int, log_dir: Path, profile: str | None = None,
                  gil_only: bool = False) -> list[subprocess.Popen[bytes]]:
    """`profile`: py-spy attached to the first worker, collapsed stacks of all threads into this
    file (written when the worker exits; the profiler is the last process of the list).
    `gil_only`: only the thread holding the GIL is sampled, so threads waiting for it (which
    cost no CPU) do not blur where the Python CPU goes."""
    processes = []
    for index in range(count):
        command = [sys.executable, "-m", "bridge.cli", "run", "--config", str(config)]
        with (log_dir / f"worker-{index}.log").open("wb") as out:
            processes.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
    if profile:
        command = [PY_SPY, "record", "--format", "raw", "--rate", "200", "-o", profile,
                   "--pid", str(processes[0].pid), *(["--gil"] if gil_only else [])]
        processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
    return processes


def exited(processes: list[subprocess.Popen[bytes]], log_dir: Path) -> None:
    """Raise, with the end of its log, when a worker has exited: the catch-up would otherwise wait
    out its timeout for records that never come (a keyspace without the tables named, say)."""
    workers = [p for p in processes if p.args[0] != PY_SPY]
    for index, process in enumerate(workers):
        if process.poll() is not None:
            log = (log_dir / f"worker-{index}.log").read_text(errors="replace").strip().splitlines()
            raise SystemExit(f"worker {index} exited ({process.returncode}) before the backlog was read: "
                             f"{log[-1] if log else 'no output'}")


def stop_workers(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to the workers by pid; an attached profiler ends (and writes) when its worker does."""
    workers = [p for p in processes if p.args[0] != PY_SPY]
    for process in workers:
        os.kill(process.pid, signal.SIGTERM)
    for process in processes:
        process.wait(60)


def pid_cpu_s(pid: int) -> float:
    """User + system CPU of a running process so far (/proc/<pid>/stat, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def process_tree(pid: int) -> list[int]:
    """`pid` and its running descendants (with `worker.processes` above 1 a `cdc-bridge run` is a
    supervisor whose worker processes do the work), oldest child first, from /proc's parent pids."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    tree, index = [pid], 0
    while index < len(tree):
        tree.extend(sorted(children.get(tree[index], [])))
        index += 1
    return tree


def tree_cpu_s(pid: int) -> float:
    """CPU of a process and its running descendants (one that exited meanwhile is no longer counted:
    the totals over a whole run come from getrusage of the reaped children)."""
    total = 0.0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            total += pid_cpu_s(member)
    return total


def cpu_seconds(processes: list[subprocess.Popen[bytes]]) -> float:
    return sum(tree_cpu_s(process.pid) for process in processes)


class MachineCpu:
    """Where the machine's cores went between `__init__` and `cores_used()`: the stack's servers
    (by their pid files), the workers, this benchmark process (filling, consuming) and the whole
    machine (/proc/stat), in cores (CPU-seconds per second)."""

    def __init__(self, workers: list[subprocess.Popen[bytes]]) -> None:
        layout = StackLayout.default()
        self._pids = {"worker": [w.pid for w in workers], "bench": [os.getpid()]}
        for service in ("cassandra", "kafka", "apicurio"):
            with contextlib.suppress(OSError, ValueError):
                self._pids[service] = [int((layout.home(service) / f"{service}.pid").read_text())]
        self._started = time.monotonic()
        self._before = self._sample()

    def _sample(self) -> dict[str, float]:
        sample = {"machine": self._machine_busy_s()}
        for name, pids in self._pids.items():
            with contextlib.suppress(OSError):
                sample[name] = sum(tree_cpu_s(pid) if name == "worker" else pid_cpu_s(pid) for pid in pids)
        return sample

    @staticmethod
    def _machine_busy_s() -> float:
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle, iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def cores_used(self) -> dict[str, float]:
        elapsed = time.monotonic() - self._started
        after = self._sample()
        return {name: round((after[name] - self._before[name]) / elapsed, 2)
                for name in after if name in self._before}


def thread_cpu_s(process: subprocess.Popen[bytes]) -> dict[str, float]:
    """CPU seconds of one process by thread name (librdkafka names its threads `rdk:*`; Python's
    threads all carry the interpreter's name): how much of the CPU is the producer's C code.
    Of a supervisor (`worker.processes` above 1): of its first worker process."""
    ticks = os.sysconf("SC_CLK_TCK")
    totals: dict[str, float] = {}
    tree = process_tree(process.pid)
    for task in Path(f"/proc/{tree[1] if len(tree) > 1 else process.pid}/task").iterdir():
        with contextlib.suppress(OSError):
            name, rest = (task / "stat").read_text().split(" (", 1)[1].rsplit(")", 1)
            fields = rest.split()
            kind = name.split("/")[0].rstrip("0123456789") if name.startswith("rdk:") else name
            totals[kind] = totals.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return {kind: round(cpu, 2) for kind, cpu in sorted(totals.items(), key=lambda item: -item[1])}


def rss_mb(process: subprocess.Popen[bytes]) -> float:
    """Resident memory of the process and its worker processes, if it supervises some."""
    total_kb = 0
    for member in process_tree(process.pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return round(total_kb / 1024, 1)


def steady_figures(first: tuple[int, float, float] | None, last: tuple[int, float, float]) -> dict[str, Any]:
    """From the first envelopes to the last: without start-up (imports, connecting, joining)."""
    if first is None or last[0] <= first[0] or last[2] <= first[2]:
        return {}
    records = last[0] - first[0]
    return {"steady_envelopes_per_s": round(records / (last[1] - first[1])),
            "steady_envelopes_per_cpu_s": round(records / (last[2] - first[2]))}


def consumer_for(endpoints: Endpoints, topics: list[str]) -> Any:
    consumer = Consumer({"bootstrap.servers": endpoints.kafka_bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    consumer.subscribe(topics)
    return consumer


def arrived(consumer: Any, most: int, timeout_s: float) -> list[Any]:
    """The messages that have arrived, as soon as there is one (waiting up to `timeout_s`).

    For delays: librdkafka's `consume(n, timeout)` returns only when it holds `n` messages or the
    timeout has passed, so a burst smaller than `n` waited the whole timeout and every delay
    measured through it was up to that much too long (0.2 s here until 2026-11-26)."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, timeout=0)]


def fill_backlog(emu: Emulator, keyspace: str, changes: int, mix: str, *, base: bool = False,
                 partitions: int = 10_000) -> dict[str, Any]:
    """Fill a fresh keyspace (log rows only unless `base`: readers of the log need no base rows;
    a check of a mirror against the source does). Returns the tables, the changes and records
    written and `envelopes`, the Kafka records the bridge must produce for them (tombstones
    included); kept in the keyspace for runs that reuse it."""
    emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                "'replication_factor': 1}")
    filled_at_ms = int(time.time() * 1000)
    if mix == "narrow":
        narrow = bulk_fill(emu, keyspace, "t", changes, partitions=partitions, base=base)
        fill = {"mix": mix, "tables": [f"{keyspace}.t"], "changes": changes, "records": narrow.records,
                "log_rows": narrow.rows, "envelopes": changes, "elapsed_s": round(narrow.elapsed_s, 3)}
    else:
        fill = {"mix": mix, **realistic_fill(emu, keyspace, changes, base=base, partitions=partitions).as_dict()}
    fill["filled_at_ms"] = filled_at_ms
    emu.session.execute(f"CREATE TABLE {keyspace}.backlog_fill (id int PRIMARY KEY, report text)")
    emu.session.execute(f"INSERT INTO {keyspace}.backlog_fill (id, report) VALUES (0, %s)", (json.dumps(fill),))
    return fill


def stored_fill(emu: Emulator, keyspace: str, changes: int) -> dict[str, Any]:
    """What an earlier run wrote into `keyspace`; a keyspace from before `backlog_fill` existed
    holds the narrow table `t` with `changes` updates."""
    if not emu.catalog.table_exists(keyspace, "backlog_fill"):
        return {"mix": "narrow", "tables": [f"{keyspace}.t"], "changes": changes, "envelopes": changes}
    row = emu.session.execute(f"SELECT report FROM {keyspace}.backlog_fill WHERE id = 0").one()
    return dict(json.loads(row[0]))


def lookback_ms(fill: dict[str, Any]) -> int:
    """The initial lookback that reaches the start of a backlog filled `filled_at_ms` (an hour, or
    more for a backlog kept from an earlier run), so a later run reads all of it."""
    filled_at_ms = fill.get("filled_at_ms")
    age_ms = int(time.time() * 1000) - int(filled_at_ms) if filled_at_ms else 0
    return max(3_600_000, age_ms + 600_000)


def catchup(args: argparse.Namespace, endpoints: Endpoints) -> dict[str, Any]:
    keyspace = args.keyspace or f"bench_{uuid.uuid4().hex[:8]}"
    mix = getattr(args, "mix", "narrow")
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        fill = stored_fill(emu, keyspace, args.changes) if args.keyspace else fill_backlog(emu, keyspace,
                                                                                           args.changes, mix)
    expected, tables = int(fill["envelopes"]), list(fill["tables"])
    name = f"bench-{uuid.uuid4().hex[:8]}"
    topics = [f"{name}.{table}" for table in tables]
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "bench.properties"
        extra = dict(getattr(args, "settings", None) or {})
        if getattr(args, "processes", None):
            extra["worker.processes"] = str(args.processes)
        config.write_text(properties(endpoints, name, ",".join(tables), args.converter, 2000,
                                     preimages=fill["mix"] == "realistic", lookback_ms=lookback_ms(fill),
                                     extra=extra))
        consumer = consumer_for(endpoints, topics)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        processes = start_workers(config, args.workers, Path(folder), args.profile,
                                  getattr(args, "profile_gil", False))
        machine = MachineCpu([p for p in processes if p.args[0] != PY_SPY])
        received = 0  # every record of the bridge's topics, tombstones included
        first: tuple[int, float, float] | None = None  # (received, time, CPU) when the first envelopes came
        rss: dict[str, float] = {}  # the first worker's RSS when a quarter, half, all of the backlog was read
        while received < expected and time.monotonic() - started < args.timeout:
            received += sum(1 for m in consumer.consume(10_000, timeout=0.5) if m.error() is None)
            exited(processes, Path(folder))
            if first is None and received:
                first = (received, time.monotonic(), cpu_seconds(processes))
            for share in ("25%", "50%", "100%"):
                if share not in rss and received >= expected * int(share[:-1]) / 100:
                    rss[share] = rss_mb(processes[0])
        elapsed = time.monotonic() - started
        last = (received, time.monotonic(), cpu_seconds(processes))
        threads = thread_cpu_s(processes[0])
        cores = machine.cores_used()
        stop_workers(processes)
        consumer.close()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    fill_s = float(fill.get("elapsed_s") or 0) if not args.keyspace else 0.0
    return {
        "bench": "worker_catchup", "mix": fill["mix"], "changes": fill["changes"], "expected": expected,
        "received": received, "workers": args.workers, "processes": getattr(args, "processes", None) or 1,
        "converter": args.converter,
        "fill_changes_per_s": round(fill["changes"] / fill_s) if fill_s else None,
        "elapsed_s": round(elapsed, 2), "envelopes_per_s": round(received / elapsed),
        "worker_cpu_s": round(cpu_s, 2), "envelopes_per_cpu_s": round(received / cpu_s) if cpu_s else None,
        "peak_rss_mb": round(after.ru_maxrss / 1024, 1), "keyspace": keyspace, "tables": tables, "topics": topics,
        "topic": topics[0],
        **steady_figures(first, last), "rss_mb_at_backlog_read": rss, "first_worker_cpu_s_by_thread": threads,
        "cores_used": cores,
        "fill": fill,
        "note": "elapsed includes worker start-up and joining the group; CPU is the workers' processes only; "
                "received counts tombstones (the bridge produces them); with --processes the CPU and "
                "rss_mb_at_backlog_read count the supervisor and its worker processes, peak_rss_mb is the largest "
                "one process",
    }


def latency(args: argparse.Namespace, endpoints: Endpoints) -> dict[str, Any]:
    keyspace = f"bench_{uuid.uuid4().hex[:8]}"
    confidence_ms = args.confidence_ms
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu, \
            tempfile.TemporaryDirectory() as folder:
        emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                    "'replication_factor': 1}")
        emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
        name = f"bench-{uuid.uuid4().hex[:8]}"
        config = Path(folder) / "bench.properties"
        config.write_text(properties(endpoints, name, f"{keyspace}.t", "json", confidence_ms,
                                     extra=getattr(args, "settings", None)))
        consumer = consumer_for(endpoints, [f"{name}.{keyspace}.t"])
        processes = start_workers(config, 1, Path(folder))
        time.sleep(5)  # joined, groups started
        counts = [0]
        writers = write_log_rows_steadily(emu.session, emu, keyspace, args.rate, args.seconds, counts)
        delays: list[float] = []
        produced: list[float] = []
        deadline = time.monotonic() + args.seconds + 30
        while time.monotonic() < deadline:
            for message in arrived(consumer, 1000, 0.2):
                if message.error() is None and message.value() is not None:
                    written_us = json.loads(message.value())["source"]["ts_us"]
                    delays.append((time.time_ns() // 1000 - written_us) / 1000 - confidence_ms)
                    produced.append(message.timestamp()[1] - written_us / 1000 - confidence_ms)
            if all(not w.is_alive() for w in writers) and len(delays) >= counts[0] > 0:
                break
        stop_workers(processes)
        consumer.close()
    return {
        "bench": "worker_latency", "rate": args.rate, "seconds": args.seconds, "written": counts[0],
        "received": len(delays), "confidence_ms": confidence_ms,
        "delay_beyond_confidence_ms": {"p50": round(percentile(delays, 0.5)), "p99": round(percentile(delays, 0.99)),
                                       "max": round(max(delays))} if delays else None,
        # the same up to the record's Kafka timestamp (set when the worker produced it): the
        # source's share of the delay; the rest is the transaction's commit and the consumer
        "produced_beyond_confidence_ms": {"p50": round(percentile(produced, 0.5)),
                                          "p99": round(percentile(produced, 0.99)),
                                          "max": round(max(produced))} if produced else None,
    }


def setting(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    modes = parser.add_subparsers(dest="mode", required=True)
    up = modes.add_parser("catchup")
    up.add_argument("--changes", type=int, default=200_000)
    up.add_argument("--converter", choices=["json", "avro"], default="json")
    up.add_argument("--workers", type=int, default=1)
    up.add_argument("--processes", type=int, default=None, metavar="N",
                    help="worker.processes of each worker (a supervisor of N worker processes); CPU and RSS "
                         "count them")
    up.add_argument("--mix", choices=["narrow", "realistic"], default="narrow",
                    help="narrow: single-row updates of (pk, ck, v int); realistic: bridge_devstack.sim.backlog's mix")
    up.add_argument("--keyspace", help="reuse a keyspace filled by an earlier run (its mix and tables)")
    up.add_argument("--timeout", type=float, default=900)
    up.add_argument("--profile", metavar="FILE", help="py-spy the first worker into FILE (collapsed stacks)")
    up.add_argument("--profile-gil", action="store_true", help="with --profile: sample only the GIL holder")
    lat = modes.add_parser("latency")
    lat.add_argument("--rate", type=float, default=1000)
    lat.add_argument("--seconds", type=float, default=30)
    lat.add_argument("--confidence-ms", type=int, default=2000)
    for mode in (up, lat):
        mode.add_argument("--set", dest="settings", metavar="KEY=VALUE", type=setting, action="append",
                          help="a worker property to add or override (repeatable), for tuning experiments")
    args = parser.parse_args()
    args.settings = dict(args.settings or [])
    endpoints = Endpoints.from_env()
    result = catchup(args, endpoints) if args.mode == "catchup" else latency(args, endpoints)
    print(json.dumps(result))
    if args.record:  # the catch-up's keys as python -m bench names them (its latency keys are in seconds)
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.results import record_report

        record_report(result, {k: k for k in ("envelopes_per_s", "steady_envelopes_per_s", "envelopes_per_cpu_s",
                                              "steady_envelopes_per_cpu_s", "peak_rss_mb")}, bench="worker_bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
