"""The stack's optional Spark standalone cluster, without starting it: opt-in, its ports derived
from the stack's offset and apart from every other service's, and its daemons' command lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.process import PidFile
from bridge_devstack.stack.spark_cluster import SPARK_CLUSTER, SparkMaster, SparkWorker, spark_home


def _manager(tmp_path: Path, **kwargs: bool) -> StackManager:
    layout = StackLayout(tmp_path / "deploy", tmp_path / "state")
    return StackManager(layout, Endpoints().shifted(100), say=lambda _: None, **kwargs)


def test_the_cluster_is_opt_in_and_shown_while_it_runs(tmp_path: Path) -> None:
    """The default stack does not grow; a running cluster is still listed (status, down)."""
    assert [s.name for s in _manager(tmp_path).services] == ["kafka", "cassandra", "apicurio"]
    assert [s.name for s in _manager(tmp_path, spark_cluster=True).services][3:] == list(SPARK_CLUSTER)
    master = _manager(tmp_path, spark_cluster=True).service("spark-master")
    master.home.mkdir(parents=True)
    PidFile(master.pid_path).write(os.getpid())  # alive, but not a master: a pid file left by a crash
    assert [s.name for s in _manager(tmp_path).services] == ["kafka", "cassandra", "apicurio"]
    looks_like_one = [sys.executable, "-c", "import time; time.sleep(30)", master.main_marker]
    with subprocess.Popen(looks_like_one) as process:
        try:
            PidFile(master.pid_path).write(process.pid)
            assert [s.name for s in _manager(tmp_path).services][3:] == list(SPARK_CLUSTER)
        finally:
            process.kill()


def test_ports_follow_the_offset_and_collide_with_no_other_service(tmp_path: Path) -> None:
    manager = _manager(tmp_path, spark_cluster=True)
    assert manager.endpoints.spark_master_url == "spark://127.0.0.1:7177"
    ports = [port for service in manager.services for port in service.ports]
    assert len(ports) == len(set(ports)), sorted(ports)
    assert min(ports) > 100 and manager.service("spark-worker-2").ports == (7179, 8192)


def test_daemons_run_pysparks_spark_class_with_their_ports(tmp_path: Path) -> None:
    layout, endpoints = StackLayout(tmp_path, tmp_path / "state"), Endpoints().shifted(100)
    master = SparkMaster(layout, endpoints)
    assert master.command() == [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                                "--host", "127.0.0.1", "--port", "7177", "--webui-port", "8190"]
    workers = [SparkWorker(i, layout, endpoints) for i in (1, 2)]
    for worker in workers:
        command = worker.command()
        assert command[1:3] == ["org.apache.spark.deploy.worker.Worker", "spark://127.0.0.1:7177"]
        assert command[command.index("--cores") + 1] == "1" and command[command.index("--memory") + 1] == "1g"
        assert command[command.index("--work-dir") + 1] == str(worker.home / "work")
        assert worker.environment()["SPARK_HOME"] == str(spark_home())
    assert [w.ports for w in workers] == [(7178, 8191), (7179, 8192)]
    assert (spark_home() / "jars").is_dir() and (spark_home() / "bin" / "spark-class").is_file()
