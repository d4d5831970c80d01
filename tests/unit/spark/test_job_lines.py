"""The pure parts of a running job's reporting: the one failure line (bridge.spark.core.fatal), the
lag per topic of the progress line (bridge.spark.core.progress) and the test-only fault's parsing
(bridge.spark.flatten.kafka_tasks)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bridge.spark.core.errors import KafkaSinkError
from bridge.spark.core.fatal import explain, start_line
from bridge.spark.core.progress import count_records, describe, lag_per_topic
from bridge.spark.flatten.kafka_tasks import FAULT_ENV, Fault

pytestmark = pytest.mark.unit

TASK_FAILED = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to stage
failure: Task 0 in stage 5.0 failed 4 times, most recent failure: Lost task 0.3 in stage 5.0 (TID 13):
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/bridge/spark/flatten/kafka_tasks.py", line 157, in _maybe_fail
bridge.spark.core.errors.KafkaSinkError: micro-batch 1: delivery failed: Broker: Message too large
"""


def test_a_task_failing_names_its_own_error_and_the_retry_setting() -> None:
    line = explain(TASK_FAILED)
    assert "failed 4 time(s)" in line
    assert "KafkaSinkError: micro-batch 1: delivery failed: Broker: Message too large" in line
    assert "spark.task.maxFailures" in line
    assert "\n" not in line


def test_out_of_memory_names_the_memory_settings() -> None:
    line = explain("Caused by: java.lang.OutOfMemoryError: Java heap space\n\tat org.apache.Foo")
    assert "OutOfMemoryError" in line and "--driver-memory" in line and "--executor-memory" in line


def test_kafka_gone_names_the_kafka_settings() -> None:
    line = explain("org.apache.spark.SparkException: boom\nCaused by: org.apache.kafka.common.errors."
                   "TimeoutException: Timed out waiting for a node assignment. Call: describeTopics")
    assert line.startswith("Kafka did not answer within its timeouts")
    assert "--bootstrap-servers" in line and "TimeoutException" in line


def test_a_lost_executor_names_executor_memory() -> None:
    assert "--executor-memory" in explain("ExecutorLostFailure (executor 1 exited caused by one of the running tasks)")


def test_anything_else_is_its_first_line_without_the_error_class() -> None:
    assert explain("[BAD_THING] a bad thing happened\nmore") == "the streaming query failed: a bad thing happened"


def test_a_jvm_that_did_not_start_points_at_its_own_lines_and_the_heap() -> None:
    line = start_line("Java gateway process exited before sending its port number.")
    assert "--driver-memory" in line and line.startswith("Spark did not start")


def test_lag_is_latest_minus_end_summed_per_topic() -> None:
    latest = '{"a": {"0": 100, "1": 50}, "b": {"0": 7}}'
    end = '{"a": {"0": 60, "1": 50}, "b": {"0": 7}}'
    assert lag_per_topic(latest, end) == {"a": 40, "b": 0}
    assert lag_per_topic(None, end) == {}
    assert lag_per_topic("not json", end) == {}


def test_the_fault_parses_and_bad_text_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    assert Fault.from_env() is None
    monkeypatch.setenv(FAULT_ENV, "batch=3,when=after-commit,attempts=2")
    assert Fault.from_env() == Fault(3, "after-commit", 2)
    monkeypatch.setenv(FAULT_ENV, "batch=x")
    with pytest.raises(KafkaSinkError, match=FAULT_ENV):
        Fault.from_env()
    monkeypatch.setenv(FAULT_ENV, "batch=1,when=sometimes")
    with pytest.raises(KafkaSinkError, match="sometimes"):
        Fault.from_env()


def test_a_micro_batch_whose_records_were_counted_shows_them_not_spark_s_reads() -> None:
    """The mirror reads its source once per table; Spark's numInputRows counts every read."""
    progress = SimpleNamespace(name="mirror-x", batchId=3, numInputRows=500, processedRowsPerSecond=250.0,
                               durationMs={"triggerExecution": 2000}, batchDuration=2000, sources=[])
    count_records("mirror-x", 3, 100)
    assert (describe(progress)["rows"], describe(progress)["rows"]) == (100, 500)  # told once, then Spark's
    count_records("mirror-x", 3, 100)
    assert describe(progress)["rows_per_s"] == 50.0


def test_a_failed_jvm_call_names_the_java_exception_not_py4j_s_line() -> None:
    """py4j's text of a failed call (CI once printed only its first line, which names no cause)."""
    text = ("An error occurred while calling o4885.delete.\n"
            ": java.lang.IllegalStateException: a thing went wrong\n"
            "\tat org.apache.spark.sql.delta.commands.DeleteCommand.run(DeleteCommand.scala:1)\n")
    assert explain(text) == "the streaming query failed: java.lang.IllegalStateException: a thing went wrong"
