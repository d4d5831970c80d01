"""Acceptance of the streaming jobs through real processes: a random workload on two tables written
through the emulator and carried by a real `cdc-bridge run` worker; `cdc-bridge spark mirror` and
`cdc-bridge spark flatten` are SIGKILLed mid-stream and restarted from their checkpoints
(tests/spark/pipeline.py; the same on a standalone cluster: test_cluster.py).

The workload size is `CDC_BRIDGE_SPARK_OPS` (1,000 by default, to keep the tier inside CI's time;
`bench/spark_bench.py` runs 5,000 and more)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge_devstack.stack.layout import Endpoints
from tests.spark.jobs import assert_console_is_ours, start_job, wait_settled, wait_until
from tests.spark.pipeline import (
    FLATTEN_ARGS,
    Pipeline,
    assert_flattened_exactly_once,
    assert_mirror_equals_base_tables,
    killed_then_resumed,
    open_pipeline,
    source_changes,
)


@pytest.fixture(scope="module")
def pipeline(stack: Endpoints, cassandra_session: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    with open_pipeline(stack, cassandra_session, tmp_path_factory.mktemp("spark-jobs")) as pipeline:
        yield pipeline


@pytest.mark.timeout(2400)
def test_mirror_equals_the_base_tables_after_a_kill_and_restart(pipeline: Pipeline, spark: Any,
                                                                cassandra_session: Any) -> None:
    """The Delta mirror equals both Cassandra tables row for row and cell for cell, after the job
    was killed mid-stream (while the second half of the workload was written) and resumed."""
    delta = pipeline.folder / "mirror"
    again = killed_then_resumed(pipeline, ["mirror", "--delta", str(delta)], "mirror", during=pipeline.second_half())
    assert_mirror_equals_base_tables(pipeline, spark, cassandra_session, delta)
    assert_one_file_per_append(spark, delta)
    assert_console_is_ours(again)  # issue 43: Ivy, log4j and the JVM's warnings in the Spark log, not here


def assert_one_file_per_append(spark: Any, delta: Path) -> None:
    """This workload's micro-batches hold fewer than `ONE_FILE_RECORDS` records (the topics have
    more partitions than one), so each append to a changelog wrote one file."""
    from delta.tables import DeltaTable

    changelogs = sorted(p for p in (delta / "_cdc_changes").glob("*/*") if (p / "_delta_log").is_dir())
    assert changelogs, "no changelog"
    for changelog in changelogs:
        appends = DeltaTable.forPath(spark, str(changelog)).history().where("operation = 'WRITE'").collect()
        files = [int(row["operationMetrics"]["numFiles"]) for row in appends]
        assert files and set(files) == {1}, (changelog.name, files)


@pytest.mark.timeout(1200)
def test_a_continuous_mirror_compacts_changes_pending_too_long_without_new_input(
        pipeline: Pipeline, spark: Any, cassandra_session: Any) -> None:
    """Compaction by age (issue 41): a continuously running mirror whose micro-batch count never
    calls for a compaction (`--compact-every-batches 1000`) folds its changes once they have been
    pending `--compact-after-seconds`, although no micro-batch comes after them (Spark runs none
    without new input): the Delta table read alone then equals the base tables, with nothing left
    pending. (Without the clock the table would stay empty until 1000 more micro-batches.)"""
    wait_settled(pipeline.stack.kafka_bootstrap, pipeline.topics)
    delta = pipeline.folder / "mirror-by-age"
    job = start_job(["mirror", "--delta", str(delta), "--config", str(pipeline.config), "--name",
                     f"{pipeline.name}-by-age", "--compact-every-batches", "1000", "--compact-after-seconds", "5"],
                    pipeline.folder, pipeline.folder / "by-age-checkpoint")
    pipeline.jobs.append(job)
    wait_until(lambda: "background compaction done" in job.log_path.read_text(errors="replace"), 900,
               "a compaction of the changes pending 5 s", job)
    job.kill()
    log = job.log_path.read_text(errors="replace")
    assert "compaction started: changes pending" in log
    assert_mirror_equals_base_tables(pipeline, spark, cassandra_session, delta)


@pytest.mark.timeout(2400)
def test_flattened_topics_have_no_duplicate_and_no_gap_after_a_kill_and_restart(pipeline: Pipeline) -> None:
    """`rewrite` mode keeps every change (deletes as `__deleted`="true"); after a SIGKILL and a
    restart the flattened topics hold each change of the source topics exactly once."""
    wait_settled(pipeline.stack.kafka_bootstrap, pipeline.topics)
    expected = source_changes(pipeline)
    assert sum(expected.values()) > 0
    again = killed_then_resumed(pipeline, FLATTEN_ARGS, "flatten")
    assert_flattened_exactly_once(pipeline, expected)
    assert_console_is_ours(again)
