"""Flatten to Kafka under failures, through real processes: a task that fails inside a
micro-batch (the test-only fault of bridge/spark/flatten/kafka_tasks.py), retried by Spark or ending the
job, and a job whose JVM runs out of heap. After each, the flattened topics read read_committed
hold each change of the source topics exactly once (the SIGKILL case is in
test_streaming_jobs.py). The workload is the module fixture of test_streaming_jobs.py (a real
worker carrying the emulator's changes)."""

from __future__ import annotations

import collections
import time

import orjson
import pytest

from tests.integration.worker.harness import read_topic
from tests.spark.jobs import SparkJob, start_job, wait_settled
from tests.spark.pipeline import Pipeline, source_changes
from tests.spark.test_streaming_jobs import pipeline

__all__ = ["pipeline"]  # the module fixture, used here under its own name
FAULT = "CDC_BRIDGE_SPARK_TEST_FAULT"
FLATTEN = ["flatten", "-o", "delete.tombstone.handling.mode=rewrite", "-o", "add.fields=op,source.ts_us"]


def _flatten(pipeline: Pipeline, label: str, *extra: str, fault: str | None = None) -> SparkJob:
    job = start_job([*FLATTEN, "--config", str(pipeline.config), "--name", f"{pipeline.name}-{label}",
                     "--output-topic", "{topic}." + label, "--max-offsets-per-trigger", "250", "--available-now",
                     *extra], pipeline.folder, pipeline.folder / f"{label}-checkpoint",
                    env={FAULT: fault} if fault else None)
    pipeline.jobs.append(job)
    return job


def _error_lines(job: SparkJob) -> list[str]:
    return [line for line in job.log_path.read_text(errors="replace").splitlines() if line.startswith("error: ")]


def _assert_exactly_once(pipeline: Pipeline, label: str) -> None:
    expected = source_changes(pipeline)
    assert sum(expected.values()) > 0
    got: collections.Counter[tuple[str, bytes, int, str]] = collections.Counter()
    for topic in pipeline.topics[:-1]:
        for key, value in read_topic(pipeline.stack.kafka_bootstrap, f"{topic}.{label}",
                                     expected=sum(n for (t, *_), n in expected.items() if t == topic), settle_s=2.0):
            assert value is not None
            payload = orjson.loads(value)["payload"]
            key_payload = orjson.dumps(orjson.loads(key or b"null")["payload"])
            got[(topic, key_payload, payload["__source_ts_us"], payload["__op"])] += 1
    duplicates = {k: n for k, n in got.items() if n > 1}
    assert duplicates == {}, f"{len(duplicates)} duplicated changes, e.g. {next(iter(duplicates))}"
    assert got == expected


@pytest.mark.timeout(1200)
def test_a_task_failing_after_its_commit_is_retried_and_writes_nothing_twice(pipeline: Pipeline) -> None:
    """Micro-batch 1's tasks fail once right after their Kafka commit; Spark retries them
    (local[2,2]: two attempts per task) and the retries find their source partitions' markers
    and skip the records already written. `--min-partitions 4` reads the three one-partition
    topics in pieces: the flattened records are re-grouped by source partition (the shuffle
    path) before the tasks produce them."""
    wait_settled(pipeline.stack.kafka_bootstrap, pipeline.topics)
    job = _flatten(pipeline, "retried", "--master", "local[2,2]", "--min-partitions", "4",
                   fault="batch=1,when=after-commit,attempts=1")
    assert job.wait(900) == 0, job.tail()
    log = job.log_path.read_text(errors="replace")
    assert "records already in kafka, skipped" in log, "the retry did not meet the first attempt's commit"
    _assert_exactly_once(pipeline, "retried")


@pytest.mark.timeout(1200)
def test_a_task_that_cannot_succeed_ends_the_job_with_one_line_and_a_restart_completes(pipeline: Pipeline) -> None:
    """Micro-batch 1's tasks fail before their commit on every attempt: the job exits non-zero
    with one line naming the failure and the retry setting. The restart re-runs the micro-batch
    (its open transactions were fenced and aborted) and the output holds each change once."""
    wait_settled(pipeline.stack.kafka_bootstrap, pipeline.topics)
    began = time.monotonic()
    job = _flatten(pipeline, "failing", fault="batch=1,when=before-commit,attempts=99")
    code = job.wait(600)
    assert code != 0, job.tail()
    lines = _error_lines(job)
    assert len(lines) == 1, job.tail()
    assert "test fault" in lines[0] and "spark.task.maxFailures" in lines[0], lines[0]
    assert time.monotonic() - began < 600
    again = _flatten(pipeline, "failing")
    assert again.wait(900) == 0, again.tail()
    _assert_exactly_once(pipeline, "failing")


@pytest.mark.timeout(900)
def test_a_driver_out_of_heap_exits_non_zero_with_one_line_naming_driver_memory(pipeline: Pipeline) -> None:
    """A driver heap far too small for the micro-batch (64 MB, Spark's own minimum check bypassed
    with spark.testing.memory; all the records in one micro-batch): the JVM exits on
    OutOfMemoryError and the job ends, within bounded time, with one line naming the cause and
    --driver-memory, instead of hanging."""
    wait_settled(pipeline.stack.kafka_bootstrap, pipeline.topics)
    began = time.monotonic()
    job = _flatten(pipeline, "oom", "--driver-memory", "64m", "--max-offsets-per-trigger", "0",
                   "--spark-conf", "spark.testing.memory=536870912")
    code = job.wait(600)
    assert code != 0, job.tail()
    lines = _error_lines(job)
    assert len(lines) == 1, job.tail()
    assert "OutOfMemoryError" in lines[0] and "--driver-memory" in lines[0], lines[0]
    assert time.monotonic() - began < 600
