"""Kafka Connect's REST API on a real worker, driven by a real Connect client from PyPI
(kafka-connect-py's library): list, expand, info, config, status, tasks, task status, pause,
resume, stop, restart, validate; bad requests get Connect's status and one line and change
nothing; with basic auth configured nothing answers without credentials; HTTPS with the stack's
kind of CA (a real X.509 CA made with `cryptography`)."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from kafka_connect import KafkaConnect

from bridge.control.control_records import TargetState
from bridge.control.control_topic import ControlTopic
from bridge.control.rest import server as rest_server
from bridge.control.rest.server import serve_rest
from bridge.control.rest.shapes import CONNECTOR_CLASS, NOT_STOPPED
from bridge.scylla.cdc_time import max_timeuuid, min_timeuuid
from bridge.settings.load import build_config, read_file
from bridge.sim import Emulator
from bridge.stack.certs import issue, new_ca
from bridge.stack.layout import Endpoints, port_offset
from tests.integration.worker.harness import DEFAULT_SLOTS, WorkerProcess, read_topic, wait_for, worker_properties
from tests.integration.worker.test_failure_modes import _poisoned_table
from tests.integration.worker.test_run import assert_each_once, insert, make_table, settled

pytestmark = pytest.mark.slow
PORT = port_offset(26000)  # 26000-26003: this file's listeners, beside the stack's ports
SLOTS = DEFAULT_SLOTS
AUTH = ("admin", "s3cret")


def _serving(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code in (200, 401)
    except httpx.HTTPError:
        return False


def _answers(port: int, auth: tuple[str, str] | None = AUTH) -> httpx.Client:
    return httpx.Client(base_url=f"http://127.0.0.1:{port}", auth=auth, timeout=30)


def test_a_connect_client_inspects_and_steers_a_worker_and_bad_requests_change_nothing(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str, tmp_path: Path,
) -> None:
    table = make_table(emulator, keyspace)
    users = tmp_path / "users"
    users.write_text(f"{AUTH[0]}: {AUTH[1]}\n")
    config_path = config_for([table], listeners=f"http://127.0.0.1:{PORT}",
                             rest__auth__credentials__file=users, scylla__ssl__truststore__password="tr0ub4dor")
    config = build_config(read_file(config_path))
    control = ControlTopic(config)
    worker = workers(config_path, "w0")
    insert(emulator, table, range(0, 10))
    wait_for(lambda: settled([worker]), 60, "the worker to own every slot")
    read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=10, settle_s=0)
    kc = KafkaConnect(url=f"http://127.0.0.1:{PORT}", auth=":".join(AUTH))

    cluster = kc.get_cluster_info()
    assert cluster["version"] == "4.1.1" and cluster["kafka_cluster_id"]
    assert kc.list_connectors() == [bridge_name]
    expanded = kc.list_connectors(expand="status")[bridge_name]["status"]
    assert expanded["connector"]["state"] == "RUNNING" and len(expanded["tasks"]) == SLOTS
    with _answers(PORT) as api:
        both = api.get("/connectors", params=[("expand", "status"), ("expand", "info"), ("expand", "nope")]).json()
        assert set(both[bridge_name]) == {"status", "info"}
        assert api.get(f"/connectors/{bridge_name}/").status_code == 200  # kafka-connect-api's trailing slash
    assert kc.get_connector(bridge_name)["tasks"][SLOTS - 1] == {"connector": bridge_name, "task": SLOTS - 1}
    shown = kc.get_connector_config(bridge_name)
    assert shown["scylla.table.names"] == table and shown["scylla.ssl.truststore.password"] == "**********"
    with _answers(PORT) as api:
        everything = " ".join(api.get(path).text for path in (
            "/connectors?expand=info", f"/connectors/{bridge_name}", f"/connectors/{bridge_name}/tasks"))
        assert "tr0ub4dor" not in everything
    status = kc.get_connector_status(bridge_name)
    assert {task["state"] for task in status["tasks"]} == {"RUNNING"} and status["type"] == "source"
    assert len(kc.list_connector_tasks(bridge_name)) == SLOTS
    assert kc.get_connector_task_status(bridge_name, 3)["id"] == 3
    validated = kc.validate_connector_config(CONNECTOR_CLASS, {"connector.class": CONNECTOR_CLASS,
                                                               "topics": "getPlugins"})
    assert validated["error_count"] > 0 and any(item["value"]["name"] == "topics" for item in validated["configs"])

    # Bad requests: Connect's status, one line, nothing changed.
    with _answers(PORT) as api:
        offsets = api.get(f"/connectors/{bridge_name}/offsets").json()
        assert len(offsets["offsets"]) > 0
        bad = {
            ("GET", "/connectors/nope/status", None): 404,
            ("PUT", "/connectors/nope/pause", None): 404,
            ("GET", f"/connectors/{bridge_name}/tasks/{SLOTS}/status", None): 404,
            ("POST", f"/connectors/{bridge_name}/tasks/{SLOTS}/restart", None): 404,
            ("PUT", f"/connector-plugins/{CONNECTOR_CLASS}/config/validate", b"{not json"): 400,
            ("PATCH", f"/connectors/{bridge_name}/offsets", json.dumps(offsets).encode()): 400,
            ("DELETE", f"/connectors/{bridge_name}/offsets", None): 400,
            ("PATCH", f"/connectors/{bridge_name}/offsets", b'{"offsets": [{"partition": {}, "offset": {}}]}'): 400,
            ("POST", "/connectors", b'{"name": "x", "config": {}}'): 405,
        }
        for (method, path, body), code in bad.items():
            answer = api.request(method, path, content=body)
            assert answer.status_code == code, (method, path, answer.text)
            assert set(answer.json()) == {"error_code", "message"} and "\n" not in answer.json()["message"]
        running = api.patch(f"/connectors/{bridge_name}/offsets", content=json.dumps(offsets)).json()
        assert running["message"] == NOT_STOPPED
        assert api.get(f"/connectors/{bridge_name}/offsets").json() == offsets
    assert control.read_target_state(10) is TargetState.STARTED

    # Basic auth: nothing without credentials (or with wrong ones), and no state changed.
    for auth in (None, (AUTH[0], "wrong")):
        with _answers(PORT, auth) as api:
            for method, path in (("GET", "/"), ("GET", "/health"), ("GET", "/connectors"),
                                 ("GET", f"/connectors/{bridge_name}/config"),
                                 ("PUT", f"/connectors/{bridge_name}/stop"),
                                 ("DELETE", f"/connectors/{bridge_name}/offsets"), ("GET", "/nope")):
                assert api.request(method, path).status_code == 401, (auth, method, path)
    assert control.read_target_state(10) is TargetState.STARTED

    # Steering writes the target state every worker follows (the worker side: test_steering.py).
    kc.pause_connector(bridge_name)
    assert control.read_target_state(10) is TargetState.PAUSED
    kc.resume_connector(bridge_name)
    assert control.read_target_state(10) is TargetState.STARTED
    kc.restart_connector(bridge_name, include_tasks=False, only_failed=False)  # sends includeTasks=False
    with _answers(PORT) as api:
        assert api.post(f"/connectors/{bridge_name}/tasks/0/restart").status_code == 204
        restarted = api.post(f"/connectors/{bridge_name}/restart", params={"includeTasks": "TRUE",
                                                                          "onlyFailed": "true"})
        assert restarted.status_code == 202 and restarted.json()["name"] == bridge_name
    # Log levels at run time: the REST server's own lines silenced, then back.
    with _answers(PORT) as api:
        logger = "bridge.control.rest"
        assert api.put(f"/admin/loggers/{logger}", json={"level": "ERROR"}).json() == [logger]
        assert api.get(f"/admin/loggers/{logger}").json()["level"] == "ERROR"
        assert logger in api.get("/admin/loggers").json()
        logged = len([e for e in worker.events() if e.get("event") == "rest request"])
        kc.pause_connector(bridge_name)
        api.put(f"/admin/loggers/{logger}", json={"level": "INFO"})
        time.sleep(0.5)
        assert len([e for e in worker.events() if e.get("event") == "rest request"]) == logged, "ERROR not applied"
        kc.resume_connector(bridge_name)
        wait_for(lambda: any(e.get("path", "").endswith("/resume") for e in worker.events()), 5, "INFO again")
        assert api.put(f"/admin/loggers/{logger}", json={"level": "LOUD"}).status_code == 400
    kc.stop_connector(bridge_name)
    assert control.read_target_state(10) is TargetState.STOPPED
    logged = worker.log_path.read_text()
    assert AUTH[1] not in logged and "tr0ub4dor" not in logged
    changes = [event for event in worker.events() if event.get("event") == "rest request"]
    assert changes and {event["user"] for event in changes} == {"admin"}


def test_restart_of_a_failed_task_and_offsets_moved_while_stopped(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    """A group failed for good (errors.retry.timeout=0) shows FAILED with its trace and
    `restart_connector_task` starts it again at once; STOP, a PATCH of the offsets past what was
    written meanwhile, RESUME: the groups start where the edit says; DELETE forgets them. A
    loopback listener without credentials allows changes."""
    poisoned, plain = _poisoned_table(emulator, keyspace), make_table(emulator, keyspace, "plain")
    config_path = config_for([poisoned, plain], slots__count=SLOTS, errors__retry__timeout=0,
                             listeners=f"http://127.0.0.1:{PORT + 2}")
    worker = workers(config_path, "w")
    wait_for(lambda: _serving(PORT + 2), 60, "the REST API to answer")
    kc = KafkaConnect(url=f"http://127.0.0.1:{PORT + 2}")
    topic = f"{bridge_name}.{plain}"
    insert(emulator, plain, range(0, 10))
    emulator.execute(f"INSERT INTO {poisoned} (id, item) VALUES (1, 'x')")

    def failed() -> list[dict[str, object]]:
        return [task for task in kc.get_connector_status(bridge_name)["tasks"] if task["state"] == "FAILED"]

    wait_for(lambda: bool(failed()), 90, "the poisoned group to fail")
    task = failed()[0]
    assert "junk" in str(task["trace"]) and "retries exhausted" in str(task["trace"]), task
    assert kc.get_connector_task_status(bridge_name, task["id"])["state"] == "FAILED"
    started = len([e for e in worker.events() if e.get("event") == "group started"])
    kc.restart_connector_task(bridge_name, task["id"])
    wait_for(lambda: len([e for e in worker.events() if e.get("event") == "group started"]) > started, 10,
             "the restarted group to start again")
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=10), range(10))

    kc.stop_connector(bridge_name)
    wait_for(lambda: kc.get_connector_status(bridge_name)["connector"]["state"] == "STOPPED", 30,
             "every worker to apply STOPPED")
    insert(emulator, plain, range(10, 20))  # while stopped; the edit below moves every group past them
    skip_us = int((time.time() + 1) * 1_000_000)
    with httpx.Client(base_url=f"http://127.0.0.1:{PORT + 2}", timeout=30) as api:
        records = api.get(f"/connectors/{bridge_name}/offsets").json()["offsets"]
        moved = [{"partition": record["partition"],
                  "offset": {"window_start": str(min_timeuuid(skip_us)), "window_end": str(max_timeuuid(skip_us))}}
                 for record in records if record["partition"]["table_name"] == "plain"]
        assert moved
        answer = api.patch(f"/connectors/{bridge_name}/offsets", json={"offsets": moved})
        assert answer.status_code == 200, answer.text
        now = {json.dumps(r["partition"], sort_keys=True): r["offset"]
               for r in api.get(f"/connectors/{bridge_name}/offsets").json()["offsets"]}
        assert all(now[json.dumps(r["partition"], sort_keys=True)] == r["offset"] for r in moved)
        time.sleep(1.5)
        kc.resume_connector(bridge_name)
        insert(emulator, plain, range(20, 30))
        delivered = read_topic(stack.kafka_bootstrap, topic, expected=20)
        assert_each_once(delivered, [*range(10), *range(20, 30)])  # type: ignore[arg-type]

        kc.stop_connector(bridge_name)
        wait_for(lambda: kc.get_connector_status(bridge_name)["connector"]["state"] == "STOPPED", 30,
                 "every worker to apply STOPPED again")
        assert api.delete(f"/connectors/{bridge_name}/offsets").status_code == 200
        assert api.get(f"/connectors/{bridge_name}/offsets").json() == {"offsets": []}


def test_https_with_a_test_ca_and_basic_auth(tmp_path: Path, stack: Endpoints) -> None:
    """No worker needed: /health answers without Kafka. The server's certificate chains to a CA
    the client trusts; a plain-HTTP request or one without credentials gets nothing else."""
    ca = new_ca("rest test CA")
    leaf = issue(ca, "localhost", server=True, client=False)
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem())
    (tmp_path / "server.crt").write_bytes(leaf.cert_pem())  # cert-manager's Secret keys: separate files
    (tmp_path / "server.key").write_bytes(leaf.key_pem())
    (tmp_path / "users").write_text(f"{AUTH[0]}: {AUTH[1]}\n")
    props = worker_properties(stack, "rest-tls", ["ks.t"], listeners=f"https://127.0.0.1:{PORT + 1}",
                              listeners__https__ssl__keystore__location=tmp_path / "server.crt",
                              listeners__https__ssl__key__location=tmp_path / "server.key",
                              rest__auth__credentials__file=tmp_path / "users")
    config = build_config(props)
    server = serve_rest(config, config.kafka_client_config())
    assert server is not None
    try:
        trust = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        url = f"https://127.0.0.1:{PORT + 1}/health"
        assert httpx.get(url, verify=trust, auth=AUTH).json()["status"] == "healthy"
        assert httpx.get(url, verify=trust).status_code == 401
        with pytest.raises(httpx.HTTPError):
            httpx.get(url, auth=AUTH)  # the system's CAs do not trust the test CA
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{PORT + 1}/health", auth=AUTH, timeout=5)
    finally:
        server.close()


def test_connections_and_requests_are_bounded(stack: Endpoints, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the metrics port: beyond MAX_CONNECTIONS idle connections a request gets 503 (and the
    server answers again once they go); a connection that trickles is cut at its deadline; a body
    over 1 MiB is refused (413) without being read whole. (A loopback listener, no Kafka needed.)"""
    monkeypatch.setattr(rest_server, "REQUEST_DEADLINE_S", 2.0)
    config = build_config(worker_properties(stack, "rest-bounds", ["ks.t"], listeners=f"http://127.0.0.1:{PORT + 3}"))
    server = serve_rest(config, config.kafka_client_config())
    assert server is not None
    url = f"http://127.0.0.1:{PORT + 3}"
    try:
        idle = [socket.create_connection(("127.0.0.1", PORT + 3)) for _ in range(rest_server.MAX_CONNECTIONS)]
        time.sleep(0.3)
        assert httpx.get(f"{url}/health", timeout=5).status_code == 503
        for connection in idle:
            connection.close()
        wait_for(lambda: httpx.get(f"{url}/health", timeout=5).status_code == 200, 10, "the server to answer again")
        slow = socket.create_connection(("127.0.0.1", PORT + 3))
        slow.sendall(b"GET /health HTTP/1.1\r\n")  # and never the rest
        slow.settimeout(5)
        started = time.monotonic()
        assert slow.recv(1024) == b"" and time.monotonic() - started < 4, "the trickling connection was not cut"
        slow.close()
        big = httpx.put(f"{url}/connector-plugins/{CONNECTOR_CLASS}/config/validate", content=b"x" * (2 << 20),
                        timeout=10)
        assert big.status_code == 413 and big.json()["error_code"] == 413
    finally:
        server.close()
