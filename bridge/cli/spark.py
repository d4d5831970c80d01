"""`cdc-bridge spark ...`: the Spark jobs' command, whose flags and handlers live in the spark
package (`bridge/spark/command.py`, shared with `python -m bridge.spark`)."""

from __future__ import annotations

from typing import Any

from bridge.spark.command import add_jobs


def register(commands: Any, *, default_master: str | None = "local[2]") -> None:
    spark = commands.add_parser("spark", help="the PySpark jobs: flatten the envelopes, mirror the tables",
                                description="Spark Structured Streaming over the envelope topics.")
    add_jobs(spark.add_subparsers(dest="spark_command", metavar="JOB", required=True), default_master)
