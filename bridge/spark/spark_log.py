"""Spark's own console output (the JVM's stdout and stderr: Ivy's dependency resolution, log4j's
lines, the Python workers' stderr) goes to a log file, so that a job's console holds our lines.

When this process starts the driver's JVM (any `--master` but `none`: pyspark runs
`spark-submit pyspark-shell` from here), `launch_gateway` takes the Popen arguments that point its
stdout and stderr to the file. Under spark-submit (`--master none`) the JVM started this process,
and its output stays where the user sent it.

A job that fails still shows why on the console: `fatal.fail` prints the end of this file
(`tail`) before its `error:` line.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# log4j2 settings of every local JVM we start (Spark's defaults plus the silenced heartbeater NPE)
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
TAIL_LINES = 60
_current: Path | None = None


def default_path(app_name: str) -> Path:
    """A new file per run under the temp folder: `<tmp>/cdc-bridge-spark/<app>-<UTC time>-<pid>.log`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path(tempfile.gettempdir()) / "cdc-bridge-spark" / f"{app_name}-{stamp}-{os.getpid()}.log"


def current() -> Path | None:
    """The file this process's JVM writes to, or None (its output is on the console)."""
    return _current


def java_option() -> str:
    """`-Dlog4j2.configurationFile=...` for spark.driver.defaultJavaOptions (quoted for spark-submit's
    option parser when the path has a space)."""
    location = LOG4J2_PROPERTIES.as_uri()
    return f'"-Dlog4j2.configurationFile={location}"' if " " in location else f"-Dlog4j2.configurationFile={location}"


def launch_gateway(conf: Mapping[str, str], path: Path) -> Any:
    """Start the local JVM (as pyspark would in `getOrCreate`) with its output appended to `path`,
    and make it the gateway pyspark's SparkContext uses. `conf` must hold every setting the JVM
    needs at its start (memory, packages, java options): spark-submit reads them from its command
    line, as when pyspark starts it."""
    global _current
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway as pyspark_launch

    path.parent.mkdir(parents=True, exist_ok=True)
    _current = path  # before the start: a JVM that does not start says why in this file
    spark_conf = SparkConf(loadDefaults=False)
    for key, value in conf.items():
        spark_conf.set(key, value)
    with path.open("ab") as out:  # the JVM holds its own descriptor once started
        gateway = pyspark_launch(spark_conf, popen_kwargs={"stdout": out, "stderr": subprocess.STDOUT})  # type: ignore[no-untyped-call]
    # pyspark's own hook for a gateway started by the caller: getOrCreate finds it and starts no other
    SparkContext._ensure_initialized(gateway=gateway)  # noqa: SLF001
    return gateway


def gateway_running() -> bool:
    from pyspark.core.context import SparkContext

    return SparkContext._gateway is not None  # noqa: SLF001


def tail(lines: int = TAIL_LINES) -> list[str]:
    """The last lines of the current file ([] without one)."""
    if _current is None or not _current.exists():
        return []
    with _current.open("rb") as log:
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - 256 * 1024))
        text = log.read().decode(errors="replace")
    return text.splitlines()[-lines:]
