"""The SparkSession the jobs run in, with the Kafka source and Delta from Maven Central.

Spark resolves `spark.jars.packages` itself (Ivy) and keeps the jars in its Ivy cache, so the
first start downloads about 200 MB and later starts are offline. The cache is `~/.ivy2` unless
`CDC_BRIDGE_IVY_DIR` names another folder. A local session that resolved the packages writes the
jars it got to a list in that cache, and later local sessions load those jars directly
(`spark.jars`): Ivy re-resolving 38 cached artifacts costs every start about 2 s.

On a cluster (`spark-submit`) the session already exists and only the SQL settings below are
applied; give the packages to `spark-submit --packages` (`cdc-bridge spark packages` prints them)
with `--conf spark.jars.ivy=` that cache (spark-submit's own default is `~/.ivy2.5.2`), and the
executors' Python with `spark.pyspark.python` (docs/spark.md, "On a standalone cluster").

Versions: pyspark 4.2.0 with delta-spark 4.4.0, whose jar is `io.delta:delta-spark_4.2_2.13`
(Delta names its artifacts after the Spark line since 4.1). delta-spark 4.4.1 exists on PyPI but
its jar is not on Maven Central, and pyspark 4.3 is outside delta-spark's `pyspark<=4.2.0`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
SCALA = "2.13"
_SQL_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    # The Kafka source keeps each idle consumer and its last fetched records for 5 minutes. With
    # our 16 MB fetches (jobs.SOURCE_FETCH) and the mirror's re-reads of a micro-batch, that held
    # about 700 MB of JSON-with-schemas records in the 1 GB heap of a local job, and the mirror's
    # compactions over the 1M-record backlog ran out of memory (bench/README.md, issue 31).
    "spark.kafka.consumer.cache.timeout": "10s",
    "spark.kafka.consumer.cache.evictorThreadRunInterval": "5s",
    "spark.kafka.consumer.fetchedData.cache.timeout": "10s",
    "spark.kafka.consumer.fetchedData.cache.evictorThreadRunInterval": "5s",
    # A job's tasks wait behind every queued task of an earlier job under FIFO; under FAIR, jobs in
    # another pool (the mirror's background compaction, `mirror.writer.COMPACTION_POOL`) share the
    # cores with them task by task, so a micro-batch beside a compaction gets a core when one frees.
    "spark.scheduler.mode": "FAIR",
}
# Local mode: few partitions (2 cores), no UI, Delta's log replay in few tasks. Adaptive query
# execution off: on micro-batches this small it only adds jobs (each shuffle stage its own) and
# re-planning of the wide plans between them (the mirror of bench/spark_bench.py at 2,000
# operations: 115 s with it, 74 s without).
_LOCAL_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.driver.memory": "1g",
    # A driver out of heap exits (code 3, bridge/spark/core/fatal.py reports it) instead of living on
    # with a dead thread and a query that never ends. In defaultJavaOptions, so that a user's
    # spark.driver.extraJavaOptions adds to it.
    "spark.driver.defaultJavaOptions": "-XX:+ExitOnOutOfMemoryError",
}


def packages() -> list[str]:
    """Maven coordinates of the Kafka source and of Delta for the installed pyspark / delta-spark."""
    spark_version = metadata.version("pyspark")
    delta_version = metadata.version("delta-spark")
    spark_line = ".".join(spark_version.split(".")[:2])
    return [
        f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{spark_version}",
        f"io.delta:delta-spark_{spark_line}_{SCALA}:{delta_version}",
    ]


def ivy_dir() -> Path:
    return Path(os.environ.get("CDC_BRIDGE_IVY_DIR") or Path.home() / ".ivy2")


@contextlib.contextmanager
def ivy_lock() -> Iterator[None]:
    """Hold while a session resolves its packages: Ivy does not lock its cache, and two processes
    resolving into it at once (a demo beside a test run) corrupt it (truncated descriptors)."""
    ivy_dir().mkdir(parents=True, exist_ok=True)
    with open(ivy_dir() / ".cdc-bridge.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _jar_list() -> Path:
    """Where a session that resolved this set of packages lists their jars: the proof of a fetch."""
    return ivy_dir() / f".cdc-bridge-{hashlib.sha256(','.join(packages()).encode()).hexdigest()[:16]}.jars"


def resolved_jars() -> str | None:
    """The jars an earlier local session resolved for these packages (`spark.jars`), or None when
    there is no list or a jar on it is gone from the cache (then Ivy resolves again)."""
    listed = _jar_list()
    if not listed.exists():
        return None
    jars = listed.read_text().strip()
    if not jars or not all(Path(jar.removeprefix("file://")).is_file() for jar in jars.split(",")):
        return None
    return jars


def _remember_jars(session: Any) -> None:
    jars = session.sparkContext.getConf().get("spark.jars", "")
    if jars:
        listed = _jar_list()
        partial = listed.with_suffix(".partial")
        partial.write_text(jars)
        partial.replace(listed)  # whole or not at all: another process may read it meanwhile


def fetch_packages() -> bool:
    """Resolve the packages into the Ivy cache by starting (and stopping) a local session, unless
    the jars of this set are listed and present (`resolved_jars`); returns whether it fetched."""
    if resolved_jars() is not None:
        return False
    from bridge.spark.core.spark_log import default_path, tail

    log = default_path("cdc-bridge-fetch")  # Ivy's ~150 lines of resolution, unless it fails
    try:
        build_session("local[1]", app_name="cdc-bridge-fetch", spark_log=log).stop()
    except Exception as error:
        raise RuntimeError("\n".join([f"fetching the Spark packages failed ({error}); the end of {log}:",
                                       *tail()])) from error
    return True


def build_session(master: str | None = "local[2]", app_name: str = "cdc-bridge-spark",
                  conf: dict[str, str] | None = None, spark_log: Path | None = None) -> Any:
    """A local session with the packages (`master`), or the spark-submit one (`master=None`).
    `spark_log`: a local JVM's console output (Ivy, log4j) goes to that file (spark_log.py), else
    to this process's console."""
    from pyspark.sql import SparkSession

    from bridge.spark.core import spark_log as output
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, str] = {}
    # A user's own spark.jars / spark.jars.packages (--spark-conf) go through Ivy, not the list
    own_jars = bool({"spark.jars", "spark.jars.packages"} & set(conf or {}))
    if master is not None:
        # Python workers run this interpreter (the venv with bridge, orjson, confluent_kafka,
        # pyarrow), not `python3` on PATH. spark.pyspark.python alone does not do it in a session
        # started from Python: pyspark's SparkContext takes the workers' interpreter from
        # PYSPARK_PYTHON (else `python3`).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        jars = None if own_jars else resolved_jars()
        dependencies = {"spark.jars": jars} if jars else {"spark.jars.packages": ",".join(packages()),
                                                          "spark.jars.ivy": str(ivy_dir())}
        settings = {**_LOCAL_CONF, "spark.master": master, **dependencies, "spark.pyspark.python": sys.executable}
        # our log4j2 settings (the heartbeater's NPE silenced), before a user's own java options
        settings["spark.driver.defaultJavaOptions"] += f" {output.java_option()}"
    settings = {**settings, "spark.app.name": app_name, **_SQL_CONF, **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    resolving = master is not None and "spark.jars.packages" in settings
    with ivy_lock() if resolving else contextlib.nullcontext():
        if master is not None and spark_log is not None and not output.gateway_running():
            output.launch_gateway(settings, spark_log)
        session = builder.getOrCreate()
        if resolving and not own_jars:
            _remember_jars(session)
    session.sparkContext.setLogLevel(os.environ.get("CDC_BRIDGE_SPARK_LOG_LEVEL", "WARN"))
    return session


def query_scoped(spark: Any, name: str) -> str:
    """`<name>:<query id>`: the identity under which a streaming job marks its micro-batches as
    written (Delta's `txnAppId`, the Kafka output's driver marker). Called on the query's thread.
    The query id, which Spark keeps in the checkpoint, tells checkpoints apart: a new checkpoint
    (deleted, or another path under the same `--name`) numbers its micro-batches from 0 again,
    and under the name alone they were taken for the earlier checkpoint's and skipped unwritten."""
    return f"{name}:{spark.sparkContext.getLocalProperty('sql.streaming.queryId')}"


TABLES_AT_ONCE = 2  # tables the mirror and the history write side by side (`side_by_side`)


def side_by_side(spark: Any, work: Callable[[Item], Result], items: list[Item]) -> list[Result]:
    """`work(item)` for each item, `TABLES_AT_ONCE` at a time: a table's many small Spark jobs and
    Delta commits leave cores idle that another table's jobs use. Each thread inherits the calling
    thread's local properties (`query_scoped` reads the query id from them); the first failure is
    raised once every started item has ended."""
    from pyspark import inheritable_thread_target

    with ThreadPoolExecutor(max_workers=min(TABLES_AT_ONCE, len(items) or 1)) as pool:
        started = [pool.submit(inheritable_thread_target(spark)(work), item) for item in items]
        return [done.result() for done in started]
