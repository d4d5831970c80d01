"""The load tier (issue 42): the machine's cores kept busy by CPU burners at about twice their
count, and on the shipped defaults (25-partition offsets topic, 64 slots): 6 workers started at
the same moment on one broker all reach RUNNING and none exits; the REST API and the CLI answer
within their deadlines (REST 10 s: bridge/control/rest/backend.py; CLI 15 s: bridge/cli/ops.py);
a catch-up under that load loses and duplicates nothing. One test, ~1-2 min of CI."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from bridge.cli.ops import TIMEOUT_S as CLI_DEADLINE_S
from bridge.control.rest.backend import TIMEOUT_S as REST_DEADLINE_S
from bridge.sim import Emulator
from bridge.stack.layout import Endpoints, port_offset
from tests.integration.worker.harness import (
    WorkerProcess,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)
from tests.integration.worker.load import cpu_burners
from tests.integration.worker.test_run import assert_each_once, insert, make_table, run_cli

pytestmark = [pytest.mark.load, pytest.mark.slow]
WORKERS = 6
ROWS = 300
PORT = port_offset(26010)  # beside test_rest_api.py's 26000-26003


def _running(worker: WorkerProcess) -> bool:
    return any(e.get("event") == "worker running" for e in worker.events())


def test_six_workers_start_together_under_cpu_load_and_deliver_each_change_once(
    emulator: Emulator, keyspace: str, stack: Endpoints, bridge_name: str, tmp_path: Path,
    workers: Callable[..., WorkerProcess],
) -> None:
    table = make_table(emulator, keyspace)
    insert(emulator, table, range(ROWS))  # the backlog the workers catch up on
    props = worker_properties(stack, bridge_name, [table])
    plain = write_properties(tmp_path / "w.properties", props)
    serving = write_properties(tmp_path / "rest.properties", {**props, "listeners": f"http://127.0.0.1:{PORT}"})
    with cpu_burners() as burners:
        started = time.monotonic()
        group = [workers(serving if i == 0 else plain, f"w{i}") for i in range(WORKERS)]
        wait_for(lambda: all(_running(w) or w.process.poll() is not None for w in group), 240,
                 "every worker to run or exit")
        exited = [w.log_path.read_text(errors="replace").splitlines()[-1:]
                  for w in group if w.process.poll() is not None]
        assert exited == [], exited
        took_s = time.monotonic() - started
        assert_each_once(read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=ROWS, settle_s=5),
                         range(ROWS))
        with httpx.Client(base_url=f"http://127.0.0.1:{PORT}", timeout=REST_DEADLINE_S + 5) as api:
            for path in (f"/connectors/{bridge_name}/status", f"/connectors/{bridge_name}/offsets"):
                asked = time.monotonic()
                answer = api.get(path)
                assert answer.status_code == 200 and time.monotonic() - asked <= REST_DEADLINE_S, (path, answer.text)
            assert len(api.get(f"/connectors/{bridge_name}/offsets").json()["offsets"]) > 0
        asked = time.monotonic()
        shown = run_cli("offsets", "show", "--config", str(plain), timeout_s=CLI_DEADLINE_S + 30)
        assert shown.returncode == 0 and time.monotonic() - asked <= CLI_DEADLINE_S + 5, shown.stderr[-2000:]
        assert all(w.process.poll() is None for w in group), "a worker exited under load"
    print(f"{WORKERS} workers RUNNING {took_s:.0f} s after a simultaneous start beside {len(burners)} CPU burners")
