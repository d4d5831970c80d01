"""The `cdc-bridge` command. Each area registers its own subcommands; this file only wires them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from bridge import __version__

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-bridge",
        description="ScyllaDB CDC to Kafka (Debezium envelopes, exactly once) and on to Spark.",
    )
    parser.add_argument("--version", action="version", version=f"cdc-bridge {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    from bridge.config_cli import register as register_config
    from bridge.demo import register as register_demo
    from bridge.ops_cli import register as register_ops
    from bridge.sim.cli import register as register_sim
    from bridge.spark.cli import register as register_spark
    from bridge.stack.cli import register as register_stack
    from bridge.worker_cli import register as register_run

    register_run(commands)
    register_ops(commands)
    register_config(commands)
    register_stack(commands)
    register_sim(commands)
    register_demo(commands)
    register_spark(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
