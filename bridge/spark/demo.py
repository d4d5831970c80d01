"""The demo's Spark step (`cdc-bridge demo --spark`): the envelopes one demo run wrote, flattened
(`rewrite` mode, `__op`) and mirrored into Delta, both with the streaming jobs run to the end of
what is there (`--available-now`), then printed."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdc-bridge-demo-probe"})
    try:
        partitions = consumer.list_topics(topic, timeout=15).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in partitions}
    finally:
        consumer.close()


def show(bootstrap: str, topic: str, start: dict[int, int], say: Callable[[str], None] = print) -> None:
    from bridge.spark.decode import ValueFormat
    from bridge.spark.jobs import RunOptions, SourceOptions, start_flatten, start_mirror
    from bridge.spark.progress import ProgressLogger
    from bridge.spark.session import build_session
    from bridge.spark.smt_options import SmtOptions
    from bridge.spark.spark_log import default_path

    log = default_path("cdc-bridge-demo")
    say("starting Spark (local[2]; the Kafka source and Delta come from the Ivy cache)")
    say(f"Spark's own output (Ivy, log4j) goes to {log}")
    try:
        spark = build_session("local[2]", app_name="cdc-bridge-demo", spark_log=log)
    except Exception as error:  # the JVM did not start: its own lines say why
        raise RuntimeError(f"Spark did not start: {error}\n{_log_tail()}") from error
    progress = ProgressLogger()
    spark.streams.addListener(progress)
    starting = json.dumps({topic: {str(p): o for p, o in start.items()}})
    source = SourceOptions(bootstrap_servers=bootstrap, topics=(topic,),
                           value_format=ValueFormat.JSON, starting_offsets=starting)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        smt = SmtOptions.from_properties({"delete.tombstone.handling.mode": "rewrite", "add.fields": "op"})
        _finish(spark, progress, start_flatten(spark, source, smt, RunOptions(str(root / "ckpt-flatten"),
                                                                              available_now=True),
                                               topic_rule=None, delta_root=str(root / "flat")))
        say("flattened (delete.tombstone.handling.mode=rewrite, add.fields=op), in Kafka order:")
        flat = spark.read.format("delta").load(str(root / "flat" / "ks" / "orders"))
        for row in flat.orderBy("__kafka_offset").collect():
            say(f"  {_fields(row.asDict(), exclude=('__key', '__tombstone', '__kafka_'))}")
        _finish(spark, progress, start_mirror(spark, source, RunOptions(str(root / "ckpt-mirror"), available_now=True),
                                              delta_root=str(root / "mirror")))
        say("mirror (Delta table ks/orders, equal to the base table):")
        mirror = spark.read.format("delta").load(str(root / "mirror" / "ks" / "orders"))
        for row in mirror.orderBy("customer", "order_id").collect():
            say(f"  {_fields(row.asDict(), exclude=('_cdc_',))}")
    spark.streams.removeListener(progress)
    spark.stop()


def _finish(spark: Any, progress: Any, query: Any) -> None:
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the Spark job failed: {query.exception()}\n{_log_tail()}")
    progress.drain(spark, query, keep=True)


def _log_tail() -> str:
    from bridge.spark import spark_log

    return "\n".join([f"the last lines of Spark's log {spark_log.current()}:", *spark_log.tail()])


def _fields(row: dict[str, Any], exclude: tuple[str, ...]) -> str:
    return json.dumps({k: v for k, v in row.items() if not k.startswith(exclude)}, default=str)
