"""`cdc-bridge stack` on a private second stack (own state folder, ports shifted), so killing
and restarting its processes never disturbs the shared stack other tests use."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge_devstack.stack.layout import Endpoints, StackLayout, port_offset
from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.process import StackError, pid_alive, port_open

PORT_OFFSET = port_offset(20000)  # beside the run's own stack, whatever its offset
CLI = [sys.executable, "-m", "bridge.cli", "stack"]


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(CLI + args, env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
                          check=False)


@pytest.fixture
def private_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {"CDC_BRIDGE_STACK_DIR": str(tmp_path / "stack"), "CDC_BRIDGE_STACK_PORT_OFFSET": str(PORT_OFFSET)}
    try:
        yield env
    finally:
        _cli(["down"], env)  # stops by the pid files of that private folder only


@pytest.mark.slow
def test_status_sees_a_killed_cassandra_and_up_brings_it_back(private_env: dict[str, str]) -> None:
    up = _cli(["up", "cassandra"], private_env)
    assert up.returncode == 0, up.stderr
    assert "stack ready in" in up.stdout

    status = _cli(["status"], private_env)
    cassandra_line = next(ln for ln in status.stdout.splitlines() if ln.startswith("cassandra"))
    assert "ready" in cassandra_line and f"127.0.0.1:{9042 + PORT_OFFSET}" in cassandra_line
    assert status.returncode == 1  # kafka and apicurio of the private stack are down

    pid = int(cassandra_line.split("pid")[1].split()[0])
    os.kill(pid, signal.SIGKILL)
    # The JVM's main thread turns zombie before its other threads have closed the sockets.
    deadline = time.monotonic() + 30
    while pid_alive(pid, "CassandraDaemon") or port_open("127.0.0.1", 9042 + PORT_OFFSET):
        assert time.monotonic() < deadline, "the killed Cassandra did not go away"
        time.sleep(0.1)

    after_kill = _cli(["status"], private_env)
    line = next(ln for ln in after_kill.stdout.splitlines() if ln.startswith("cassandra"))
    assert " down " in line and f"process {pid} from the pid file is gone" in line

    again = _cli(["up", "cassandra"], private_env)
    assert again.returncode == 0, again.stderr
    restarted = _cli(["status"], private_env)
    line = next(ln for ln in restarted.stdout.splitlines() if ln.startswith("cassandra"))
    assert "ready" in line and f"pid {pid} " not in line

    down = _cli(["down"], private_env)
    assert "cassandra: stopped" in down.stdout
    assert " down " in next(ln for ln in _cli(["status"], private_env).stdout.splitlines()
                            if ln.startswith("cassandra"))


def test_up_is_idempotent_on_the_shared_stack(stack: Endpoints) -> None:
    manager = StackManager.default()
    assert manager.up(quiet=True) == []
    assert all(s.state == "ready" for s in manager.status())


def test_a_port_taken_by_another_process_is_reported(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        endpoints = Endpoints(cassandra_port=port)
        manager = StackManager(StackLayout(StackLayout.default().deploy_dir, tmp_path), endpoints, say=lambda _: None)
        with pytest.raises(StackError, match=f"port {port} is in use by a process this stack did not start"):
            manager.up(only=["cassandra"])


def test_missing_java_and_missing_maven_are_one_clear_line(private_env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "bin-empty"
    empty.mkdir()
    result = _cli(["up", "kafka"], {**private_env, "PATH": str(empty)})
    assert result.returncode == 2
    assert result.stderr.strip() == ("cdc-bridge stack: Java is not on PATH; the stack needs Java 17 or newer "
                                     "(apt-get install openjdk-17-jre)")

    java_only = tmp_path / "bin-java"
    java_only.mkdir()
    (java_only / "java").symlink_to(shutil.which("java") or "/usr/bin/java")
    result = _cli(["up", "kafka"], {**private_env, "PATH": str(java_only)})
    assert result.returncode == 2
    assert "Maven (mvn) is not on PATH" in result.stderr


def test_a_failed_download_names_the_retry_command(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    shutil.copytree(StackLayout.default().deploy_dir, deploy)
    pom = deploy / "kafka" / "pom.xml"
    pom.write_text(pom.read_text().replace("<kafka.version>4.3.1</kafka.version>",
                                           "<kafka.version>0.0.0-no-such-version</kafka.version>"))
    manager = StackManager(StackLayout(deploy, tmp_path / "state"), Endpoints().shifted(PORT_OFFSET),
                           say=lambda _: None)
    with pytest.raises(StackError) as failure:
        manager.up(only=["kafka"])
    message = str(failure.value)
    assert message.startswith("downloading kafka from Maven Central failed")
    assert f"retry with: mvn -q -B -f {pom} dependency:copy-dependencies" in message


@pytest.mark.slow
def test_a_process_dying_during_start_shows_its_log(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    shutil.copytree(StackLayout.default().deploy_dir, deploy)
    config = deploy / "cassandra" / "cassandra.yaml.in"
    config.write_text(config.read_text() + "no_such_cassandra_setting: 1\n")
    manager = StackManager(StackLayout(deploy, tmp_path / "state"), Endpoints().shifted(PORT_OFFSET),
                           say=lambda _: None)
    try:
        with pytest.raises(StackError) as failure:
            manager.up(only=["cassandra"])
    finally:
        manager.down()
    message = str(failure.value)
    assert message.startswith("cassandra died during start; last lines of")
    assert "no_such_cassandra_setting" in message
