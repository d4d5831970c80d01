"""`cdc-bridge demo`: the ScyllaDB blog's orders example through one real worker
(the scenario: `devstack/bridge_devstack/sim/demo.py`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bridge_devstack.sim.demo import run
from bridge_devstack.stack.layout import Endpoints
from bridge_devstack.stack.process import port_open


def register(commands: Any) -> None:
    demo = commands.add_parser("demo", help="the blog's orders example through one real worker on the local stack",
                               description=__doc__.splitlines()[0] if __doc__ else None)
    demo.add_argument("--spark", action="store_true", help="then flatten and mirror the events with the Spark "
                      "jobs (needs the spark extra: scripts/setup --spark)")
    demo.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    endpoints = Endpoints.from_env()
    down = [f"{name} {host}:{port}" for name, host, port in (
        ("Kafka", endpoints.host, endpoints.kafka_port),
        ("Cassandra", endpoints.cassandra_host, endpoints.cassandra_port),
    ) if not port_open(host, port)]
    if down:  # one line that says what to do, not a client library's traceback
        print(f"error: the local stack is not running ({', '.join(down)} do not answer):"
              " start it with `cdc-bridge stack up` (or run scripts/demo, which does)", file=sys.stderr)
        return 2
    run(endpoints, spark=args.spark)
    return 0
