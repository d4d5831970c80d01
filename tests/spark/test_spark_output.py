"""The log4j2 settings of our local JVMs (bridge/spark/log4j2.properties): Spark's own bug
SPARK-59451, the heartbeater's NullPointerException on a half-deserialized accumulator, is the one
message silenced; every other line of its logger stays. Checked in the tests' shared JVM, which
build_session starts with these settings."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.spark]
UTILS = "org.apache.spark.util.Utils"


def _dropped(spark: Any, logger: str, message: str) -> bool:
    """Whether log4j's configuration drops an ERROR event of `logger` with `message`."""
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    config = log4j.LogManager.getContext(False).getConfiguration()
    event = (log4j.core.impl.Log4jLogEvent.newBuilder().setLoggerName(logger).setLevel(log4j.Level.ERROR)
             .setMessage(log4j.message.SimpleMessage(message)).build())
    found = config.getLoggerConfig(logger)
    return bool(found.isFiltered(event) or config.getRootLogger().isFiltered(event))


def test_only_the_heartbeaters_npe_is_silenced(spark: Any) -> None:
    config = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()
    assert config.getLoggerConfig(UTILS).getName() == UTILS  # our file is the configuration in use
    assert _dropped(spark, UTILS, "Uncaught exception in thread executor-heartbeater")
    assert not _dropped(spark, UTILS, "Uncaught exception in thread task-result-getter-0")
    executor = "org.apache.spark.executor.Executor"
    assert not _dropped(spark, executor, "Uncaught exception in thread executor-heartbeater")
    # the logger keeps the root's level (WARN after setLogLevel): its warnings still reach the log
    assert str(config.getLoggerConfig(UTILS).getLevel()) == str(config.getRootLogger().getLevel())
