"""`cdc-bridge stack up|status|down`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.process import StackError
from bridge_devstack.stack.spark_cluster import SPARK_CLUSTER

SERVICES = ("kafka", "cassandra", "apicurio", *SPARK_CLUSTER)


def _only(args: argparse.Namespace) -> list[str] | None:
    unknown = sorted(set(args.service or ()) - set(SERVICES))
    if unknown:
        raise StackError(f"unknown service {unknown[0]!r}; the services are {', '.join(SERVICES)}")
    return list(args.service) if args.service else None


def _up(args: argparse.Namespace) -> int:
    only = _only(args)
    cluster = args.spark_cluster or bool(only and set(only) & set(SPARK_CLUSTER))
    manager = StackManager.default(secure=True if args.secure else None, spark_cluster=cluster)
    manager.up(only=only)
    if manager.secure is not None:
        print(f"secured: CA, client certificate and passwords in {manager.secure.folder}; worker settings in "
              f"{manager.secure.worker_properties_path}")
    return 0


def _down(args: argparse.Namespace) -> int:
    if not StackManager.default().down(only=_only(args)):
        print("nothing to stop: no service of this stack is running")
    return 0


def _status(args: argparse.Namespace) -> int:
    statuses = StackManager.default().status()
    for status in statuses:
        pid = f"pid {status.pid}" if status.pid else "-"
        line = f"{status.name:<14} {status.state:<9} {pid:<11} {status.endpoint}"
        print(line + (f"  ({status.detail})" if status.detail else ""))
    return 0 if all(s.state == "ready" for s in statuses) else 1


def _guarded(handler: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(handler(args))
        except StackError as error:
            print(f"cdc-bridge stack: {error}", file=sys.stderr)
            return 2

    return run


def register(commands: Any) -> None:
    stack = commands.add_parser(
        "stack", help="run the local Kafka + Cassandra + schema registry stack",
        description="Real Apache Kafka (KRaft), Apache Cassandra 5.0 and Apicurio Registry, fetched from "
                    "Maven Central and run as local processes. State lives in .stack/ (or $CDC_BRIDGE_STACK_DIR); "
                    "$CDC_BRIDGE_STACK_PORT_OFFSET shifts every port. --spark-cluster adds a Spark standalone "
                    "master and two workers run from the installed pyspark's jars.",
    )
    actions = stack.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, handler, text in (
        ("up", _up, "fetch (first time), start and wait until every service accepts clients"),
        ("down", _down, "stop the processes this stack started (by pid file)"),
        ("status", _status, "show each service's state; exit 0 only if all are ready"),
    ):
        sub = actions.add_parser(name, help=text, description=text)
        if name != "status":
            sub.add_argument("service", nargs="*", metavar="SERVICE",
                             help=f"only these services, of {', '.join(SERVICES)} (default: all but the Spark cluster)")
        if name == "up":
            sub.add_argument("--secure", action="store_true",
                             help="the secured variant: Kafka SASL_SSL (SCRAM-SHA-512, PLAIN) and TLS with client "
                                  "certificates, Cassandra with passwords and TLS; certificates made at set-up. "
                                  "Fixed per state folder")
            sub.add_argument("--spark-cluster", action="store_true",
                             help="also a Spark standalone master and two workers (1 core, 1g each) from the "
                                  "installed pyspark, for spark-submit --master spark://... (docs/spark.md)")
        else:
            sub.set_defaults(service=None)
        sub.set_defaults(handler=_guarded(handler))
