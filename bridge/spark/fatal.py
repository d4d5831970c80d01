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


def explain(text: str) -> str:
    """The one line for a failure's text (an exception's message or a JVM's exit)."""
    if "OutOfMemoryError" in text or "GC overhead limit" in text:
        return f"out of memory (java.lang.OutOfMemoryError): {MEMORY_HINT}"
    cause = _root_cause(text)
    if "ExecutorLostFailure" in text or "Lost executor" in text or "heartbeat timed out" in text:
        return f"an executor was lost ({cause}): raise --executor-memory, or see the executor's log"
    if re.search(r"Timeout(Exception)?|timed out", text) and re.search(r"[Kk]afka", text):
        return (f"Kafka did not answer within its timeouts ({cause}): check --bootstrap-servers and the "
                "kafka.* settings, or raise --kafka default.api.timeout.ms / request.timeout.ms")
    failed = re.search(r"Task \S+ in stage \S+ failed (\d+) times", text)
    if failed:
        return (f"a task failed {failed.group(1)} time(s) and the job stops: {cause} (retries: "
                "spark.task.maxFailures, or local[N,F] in --master for local mode)")
    return f"the streaming query failed: {cause}"


def _root_cause(text: str) -> str:
    """The most telling line of a Spark failure: a Python task's own exception line, else the last
    `Caused by:`, else the first line; without Spark's error-class prefix."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    python = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)
              and not line.startswith(("org.apache.spark", "py4j", "java.lang.Thread"))]
    caused = [line[len("Caused by: "):] for line in lines if line.startswith("Caused by: ")]
    found = python[-1] if python else caused[-1] if caused else (lines[0] if lines else "no message")
    found = re.sub(r"^\[[A-Z_.]+\]\s*", "", found)
    return found[:400]


def fail(line: str, code: int = 1) -> NoReturn:
    """Print `error: <line>` once (whichever thread comes first) and leave now."""
    if _printed.acquire(blocking=False):
        print(f"error: {line}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)
    while True:
        time.sleep(3600)  # another thread is printing and exiting


def watch_jvm(spark: Any, interval_s: float = 1.0) -> None:
    """A daemon thread ending the process as soon as the local JVM is gone."""
    process = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    if process is None:
        return  # spark-submit started the JVM (and this process): its end ends us

    def watch() -> None:
        while process.poll() is None:
            time.sleep(interval_s)
        code = process.returncode
        if code == OOM_EXIT_CODE:
            fail(f"the Spark JVM ran out of memory (java.lang.OutOfMemoryError) and exited: {MEMORY_HINT}")
        fail(f"the Spark JVM exited unexpectedly (code {code}); its last lines above say why")

    threading.Thread(target=watch, name="jvm-watchdog", daemon=True).start()
