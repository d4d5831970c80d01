"""The shipped defaults, quiet and under CPU load (issue 42): REST `GET /connectors/{name}/offsets`
and `/status` p99, `cdc-bridge offsets show` wall time (a fresh process, as a user runs it), and
how many of 6 workers started at the same moment reach RUNNING beside CPU burners at twice the
cores. Every worker runs the defaults (25-partition offsets topic, 64 slots) but for the stack's
emulator keyspaces and a start 5 min back (the rows are written first).

    .venv/bin/python bench/defaults_bench.py [--requests 40] [--record]

Prints one JSON object: the quiet keys (`rest_offsets_p99_s`, `rest_status_p99_s`,
`offsets_show_s`), the same under load prefixed `loaded_`, and `loaded_start_workers_running`
(of 6). Every process it starts (workers, burners) is stopped by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints

WORKERS = 6
ROWS = 200
CLI = [sys.executable, "-m", "bridge.cli"]


def _properties(endpoints: Endpoints, name: str, table: str, port: int | None) -> str:
    props = {"name": name, "topic.prefix": name, "scylla.table.names": table,
             "scylla.cluster.ip.addresses": f"{endpoints.cassandra_host}:{endpoints.cassandra_port}",
             "scylla.initial.lookback.ms": "300000", "metrics.port": "0",
             "scylla.cdc.metadata.vnodes.keyspace": "sim_system_distributed",
             "scylla.cdc.metadata.tablets.keyspace": "sim_system",
             "kafka.bootstrap.servers": endpoints.kafka_bootstrap}
    if port is not None:
        props["listeners"] = f"http://127.0.0.1:{port}"
    return "".join(f"{key}={value}\n" for key, value in props.items())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([*CLI, "run", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT)


def _running(log: Path) -> bool:
    return '"event": "worker running"' in log.read_text(errors="replace")


def _stop(processes: list[subprocess.Popen[Any]]) -> None:
    for process in processes:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(10)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3)


def _measure(port: int, name: str, config: Path, requests: int) -> dict[str, float]:
    timings: dict[str, list[float]] = {"offsets": [], "status": []}
    for _ in range(requests):
        for what in timings:
            # A connection per request, as curl or a probe makes: a kept-alive one races the
            # server's idle close (KEEP_ALIVE_S) on a loaded machine, which is the client's to retry.
            asked = time.monotonic()
            answer = httpx.get(f"http://127.0.0.1:{port}/connectors/{name}/{what}", timeout=60)
            if answer.status_code != 200:
                raise RuntimeError(f"GET {what}: {answer.status_code} {answer.text[:300]}")
            timings[what].append(time.monotonic() - asked)
    shows = []
    for _ in range(3):
        asked = time.monotonic()
        subprocess.run([*CLI, "offsets", "show", "--config", str(config)], check=True, capture_output=True, timeout=120)
        shows.append(time.monotonic() - asked)
    return {"rest_offsets_p99_s": _p99(timings["offsets"]), "rest_status_p99_s": _p99(timings["status"]),
            "offsets_show_s": round(max(shows), 3)}


def _wait(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def _bytecode() -> None:
    """Every process started here reads the bridge's modules compiled, as an installed wheel has
    them (pip compiles at install; the image's build does): compiled once here into the source
    tree's __pycache__ folders (git ignores them), and read by the processes started here even
    where PYTHONDONTWRITEBYTECODE is set (this machine's environment; it stops only the writing).
    Without them each process compiles the bridge's modules from source at its start: 0.1-0.2
    CPU-s that no installed `cdc-bridge offsets show` pays, and several seconds of it under the
    load tier."""
    import bridge

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(bridge.__file__).parent)], check=True,
                   env={key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"})


def run(requests: int) -> dict[str, Any]:
    endpoints = Endpoints.from_env()
    folder = Path(tempfile.mkdtemp(prefix="defaults-bench-"))
    _bytecode()
    keyspace, name = f"dbench_{uuid.uuid4().hex[:8]}", f"dbench-{uuid.uuid4().hex[:8]}"
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
        emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                    "'replication_factor': 1}")
        emu.execute(f"CREATE TABLE {keyspace}.orders (id int PRIMARY KEY, item text) WITH cdc = {{'enabled': true}}")
        for i in range(ROWS):
            emu.execute(f"INSERT INTO {keyspace}.orders (id, item) VALUES ({i}, 'apple')")
    table = f"{keyspace}.orders"
    port = _free_port()
    serving, plain = folder / "rest.properties", folder / "w.properties"
    serving.write_text(_properties(endpoints, name, table, port))
    plain.write_text(_properties(endpoints, name, table, None))
    report: dict[str, Any] = {"cores": os.cpu_count(), "requests": requests}
    workers: list[subprocess.Popen[bytes]] = []
    burners: list[subprocess.Popen[bytes]] = []
    try:
        workers.append(_start(serving, folder / "quiet.log"))
        if not _wait(lambda: _running(folder / "quiet.log"), 180):
            raise RuntimeError(f"the quiet worker did not start: {folder / 'quiet.log'}")
        time.sleep(5)  # its first commits
        report["load_quiet"] = os.getloadavg()[0]
        report.update(_measure(port, name, plain, requests))
        _stop(workers)
        workers.clear()
        burners = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"])
                   for _ in range(2 * (os.cpu_count() or 1))]
        time.sleep(3)
        logs = [folder / f"loaded-{i}.log" for i in range(WORKERS)]
        workers = [_start(serving if i == 0 else plain, log) for i, log in enumerate(logs)]
        started = time.monotonic()
        _wait(lambda: all(_running(log) or w.poll() is not None for log, w in zip(logs, workers, strict=True)), 240)
        running = sum(1 for log, w in zip(logs, workers, strict=True) if _running(log) and w.poll() is None)
        report["loaded_start_workers_running"] = running
        report["loaded_start_s"] = round(time.monotonic() - started, 1)
        report["load_loaded"] = os.getloadavg()[0]
        report.update({f"loaded_{key}": value for key, value in _measure(port, name, plain, requests).items()})
        report["loaded_workers_alive_at_end"] = sum(1 for w in workers if w.poll() is None)
    finally:
        _stop(workers)
        _stop(burners)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40, help="REST requests per endpoint and phase")
    parser.add_argument("--record", action="store_true", help="merge the headline keys into bench/results.json")
    args = parser.parse_args()
    report = run(args.requests)
    print(json.dumps(report))
    if args.record:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.results import command_line, record

        keys = ("rest_offsets_p99_s", "rest_status_p99_s", "offsets_show_s", "loaded_rest_offsets_p99_s",
                "loaded_rest_status_p99_s", "loaded_offsets_show_s", "loaded_start_workers_running")
        record({key: report[key] for key in keys}, command_line(), bench="defaults_bench",
               note=f"bytecode compiled as installed; quiet load {report['load_quiet']:.1f}, "
                    f"loaded {report['load_loaded']:.1f} "
                    f"({2 * (report['cores'] or 1)} CPU burners on {report['cores']} cores); of {WORKERS} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
