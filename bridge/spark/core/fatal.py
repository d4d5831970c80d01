"""A job that cannot go on ends: non-zero exit, one line naming the cause and the setting that
helps, in bounded time.

Three ways a job dies, and how each is caught:
- the streaming query fails (a task that failed `spark.task.maxFailures` times, a lost executor,
  Kafka past its timeouts, bad input): `awaitTermination` returns and `query.exception()` says why;
- the driver JVM runs out of heap: it is started with `-XX:+ExitOnOutOfMemoryError` (session.py),
  so it exits (code 3) instead of living on with a dead thread, as `task-result-getter` did, with
  the query hanging forever; the watchdog below sees the JVM gone (local mode: pyspark started it)
  and the py4j calls of the main thread fail;
- anything else the JVM dies of: the same watchdog.

After the line is printed the Python process leaves with `os._exit`: a `SparkContext.stop()` or the
py4j callback server's threads could otherwise hold it up.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import Any, NoReturn

OOM_EXIT_CODE = 3  # HotSpot's exit code under -XX:+ExitOnOutOfMemoryError
_printed = threading.Lock()

MEMORY_HINT = ("raise --driver-memory (local mode: the tasks run in the driver's JVM) or --executor-memory, "
               "or lower --max-offsets-per-trigger")


# Kafka's Java client (Spark's source) and librdkafka (the tasks' producers) giving up on the brokers
KAFKA_DOWN = re.compile(r"org\.apache\.kafka\.common\.errors\.TimeoutException|Timed out waiting for a node|"
                        r"_TIMED_OUT|_MSG_TIMED_OUT|_TRANSPORT|_ALL_BROKERS_DOWN")


def explain(text: str) -> str:
    """The one line for a failure's text (an exception's message or a JVM's exit)."""
    if "OutOfMemoryError" in text or "GC overhead limit" in text:
        return f"out of memory (java.lang.OutOfMemoryError): {MEMORY_HINT}"
    cause = _root_cause(text)
    if "ExecutorLostFailure" in text or "Lost executor" in text or "heartbeat timed out" in text:
        return f"an executor was lost ({cause}): raise --executor-memory, or see the executor's log"
    if KAFKA_DOWN.search(text):
        return (f"Kafka did not answer within its timeouts ({cause}): check --bootstrap-servers and the "
                "kafka.* settings, or raise --kafka default.api.timeout.ms / request.timeout.ms")
    failed = re.search(r"Task \S+ in stage \S+ failed (\d+) times", text)
    if failed or "thrown from the Python worker" in text:
        times = f" {failed.group(1)} time(s)" if failed else ""
        return (f"a task failed{times} and the job stops: {cause} (retries: spark.task.maxFailures, or "
                "local[N,F] in --master for local mode; the restarted job re-runs the micro-batch)")
    return f"the streaming query failed: {cause}"


def _root_cause(text: str) -> str:
    """The most telling line of a Spark failure: a Python task's own exception line, else the last
    `Caused by:`, else the first line; without Spark's error-class prefix. py4j puts the Java
    exception of a failed call on the line after "An error occurred while calling o1.m.", after
    ": "."""
    lines = [line.strip().removeprefix(": ") for line in text.splitlines() if line.strip()]
    python = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)
              and not line.startswith(("org.apache.spark", "py4j", "java.lang.Thread"))]
    caused = [line[len("Caused by: "):] for line in lines if line.startswith("Caused by: ")]
    found = python[-1] if python else caused[-1] if caused else (lines[0] if lines else "no message")
    found = re.sub(r"^\[[A-Z_.]+\]\s*", "", found)
    return found[:400]


def fail(line: str, code: int = 1) -> NoReturn:
    """Print `error: <line>` once (whichever thread comes first) and leave now."""
    if _printed.acquire(blocking=False):
        from bridge.spark.core import spark_log
        log, tail = spark_log.current(), spark_log.tail()
        if tail:  # the JVM's own account (its stack traces) of what the line below sums up
            print(f"the last {len(tail)} lines of Spark's log {log}:", *(f"  {t}" for t in tail), sep="\n",
                  file=sys.stderr)
        print(f"error: {line}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)
    while True:
        time.sleep(3600)  # another thread is printing and exiting


def _jvm_process(spark: Any) -> Any:
    """The JVM's Popen when pyspark started it here (local mode), else None (spark-submit started
    the JVM and this process: its end ends us)."""
    return getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)


def _jvm_line(code: int) -> str:
    if code == OOM_EXIT_CODE:
        return f"the Spark JVM ran out of memory (java.lang.OutOfMemoryError) and exited: {MEMORY_HINT}"
    return f"the Spark JVM exited unexpectedly (code {code}); its last lines above say why"


def failure_line(spark: Any, text: str) -> str:
    """The line for an exception of the main thread: when the JVM is gone (py4j's connection
    refused), its exit code says more than the exception."""
    process = _jvm_process(spark)
    if process is not None:
        try:
            return _jvm_line(process.wait(5))
        except Exception:  # noqa: S110 (still running: the exception is the cause)
            pass
    return explain(text)


def start_line(text: str) -> str:
    """The line for a session that did not start."""
    if "Java gateway process exited" in text or "sending or receiving" in text:
        return ("Spark did not start: its JVM exited before it was ready (its last lines above say why; "
                "'OutOfMemoryError' there: raise --driver-memory)")
    return f"Spark did not start: {explain(text)}"


def watch_jvm(spark: Any, interval_s: float = 1.0) -> None:
    """A daemon thread ending the process as soon as the local JVM is gone."""
    process = _jvm_process(spark)
    if process is None:
        return

    def watch() -> None:
        while process.poll() is None:
            time.sleep(interval_s)
        fail(_jvm_line(process.returncode))

    threading.Thread(target=watch, name="jvm-watchdog", daemon=True).start()
