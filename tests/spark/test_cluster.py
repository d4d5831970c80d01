"""The streaming jobs on a real Spark standalone cluster (the stack's master and two 1-core
workers, devstack/bridge_devstack/stack/spark_cluster.py), submitted as docs/spark.md says ("On a standalone
cluster"): spark-submit in client mode with the packages, the driver here and the executors in
the workers' JVMs and Python processes. The same workload and checks as the local-mode
test_streaming_jobs.py: each job SIGKILLed mid-stream (its driver: the executors go with it) and
resumed from its checkpoint; the mirror equals the base tables, the flattened topics hold each
change once."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.spark_cluster import SPARK_CLUSTER
from tests.spark.jobs import SparkJob, submit_command, submit_job, wait_settled
from tests.spark.pipeline import (
    FLATTEN_ARGS,
    Launcher,
    Pipeline,
    assert_flattened_exactly_once,
    assert_mirror_equals_base_tables,
    killed_then_resumed,
    open_pipeline,
    source_changes,
)


@pytest.fixture(scope="module")
def pipeline(stack: Endpoints, cassandra_session: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    with open_pipeline(stack, cassandra_session, tmp_path_factory.mktemp("spark-cluster")) as pipeline:
        yield pipeline


@pytest.fixture
def submit(spark_cluster: str) -> Launcher:
    return functools.partial(submit_job, spark_cluster)


def _ran_on_the_cluster(job: SparkJob) -> None:
    """The driver registered with the master and its executors ran in the workers (each keeps an
    executor's folder under its work dir): not local mode."""
    found = re.search(r"Connected to Spark cluster with app ID (\S+)", job.log_path.read_text(errors="replace"))
    assert found is not None, job.tail()
    layout = StackLayout.default()
    executors = [p for name in SPARK_CLUSTER[1:] for p in (layout.home(name) / "work" / found[1]).glob("*")]
    assert executors, f"no executor of {found[1]} in the workers' work folders"


@pytest.mark.timeout(2400)
def test_mirror_on_a_cluster_equals_the_base_tables_after_a_kill_and_restart(
        pipeline: Pipeline, submit: Launcher, cassandra_session: Any, request: pytest.FixtureRequest) -> None:
    """The Delta mirror written by the cluster's executors equals both Cassandra tables row for
    row, after the job was killed mid-stream (while the second half of the workload was written)
    and resumed."""
    delta: Path = pipeline.folder / "mirror"
    job = killed_then_resumed(pipeline, ["mirror", "--delta", str(delta)], "mirror", during=pipeline.second_half(),
                              launch=submit)
    _ran_on_the_cluster(job)
    # the local session that reads the Delta tables back starts only now, beside no job
    assert_mirror_equals_base_tables(pipeline, request.getfixturevalue("spark"), cassandra_session, delta)


@pytest.mark.timeout(2400)
def test_flatten_on_a_cluster_writes_each_change_once_after_a_kill_and_restart(pipeline: Pipeline,
                                                                               submit: Launcher) -> None:
    """The executors' tasks produce the flattened records in their Kafka transactions; after a
    SIGKILL of the driver and a restart the flattened topics hold each change exactly once."""
    wait_settled(pipeline.stack.kafka_bootstrap, pipeline.topics)
    expected = source_changes(pipeline)
    assert sum(expected.values()) > 0
    job = killed_then_resumed(pipeline, FLATTEN_ARGS, "flatten", launch=submit)
    _ran_on_the_cluster(job)
    assert_flattened_exactly_once(pipeline, expected)


@pytest.mark.timeout(600)
def test_executors_without_the_project_end_the_job_at_start_with_one_line(spark_cluster: str,
                                                                          tmp_path: Path) -> None:
    """Executors whose Python lacks `bridge` and the `spark` extra (a bare virtualenv of the same
    Python, named by spark.pyspark.python; the driver keeps this venv's): the job exits 2 at start
    with one `error:` line naming the interpreter, the missing modules and the setting, instead
    of failing its first micro-batch task by task."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    command = submit_command(spark_cluster, ["mirror", "--bootstrap-servers", "127.0.0.1:1", "--topics", "t",
                                             "--checkpoint", str(tmp_path / "ckpt"), "--delta", str(tmp_path / "d")])
    command[command.index(f"spark.pyspark.python={sys.executable}")] = f"spark.pyspark.python={bare / 'bin/python'}"
    command[1:1] = ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=540, env=env,
                          check=False)  # spark-submit passes the Python driver's stderr to its stdout
    errors = [line for line in done.stdout.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2, done.stdout[-3000:]
    assert len(errors) == 1, done.stdout[-3000:]
    assert f"({bare / 'bin/python'}) cannot import bridge, confluent_kafka, orjson, pyarrow, pandas" in errors[0]
    assert "spark.pyspark.python" in errors[0]
