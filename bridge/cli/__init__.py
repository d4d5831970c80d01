"""The `cdc-bridge` command: one thin adapter module per subcommand (parse, call, print one line on
an error); this file only wires them."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int]


# Each command's module registers it; in the order `--help` lists them.
_COMMANDS: dict[str, str] = {
    "run": "bridge.cli.run",
    "status": "bridge.cli.ops",
    "offsets": "bridge.cli.ops",
    "snapshot": "bridge.cli.snapshot",
    "pause": "bridge.cli.control",
    "resume": "bridge.cli.control",
    "stop": "bridge.cli.control",
    "restart": "bridge.cli.control",
    "config": "bridge.cli.config",
    "spark": "bridge.cli.spark",
}


# Other distributions add commands here (name = module with a `register(commands)`), e.g. the
# development distribution's (devstack/pyproject.toml) `stack`, `sim` and `demo`: a product-only
# install lists the product's own.
PLUGIN_GROUP = "cdc_bridge.commands"


def _command_table() -> dict[str, str]:
    """The product's commands, then the installed plugins' in name order; a plugin never replaces
    a product command."""
    from importlib.metadata import entry_points  # 0.1 s of a command's start: only when asked

    plugins = {ep.name: ep.module for ep in entry_points(group=PLUGIN_GROUP) if ep.name not in _COMMANDS}
    return {**_COMMANDS, **dict(sorted(plugins.items()))}


class _Version(argparse.Action):
    """`--version`, resolved only when asked: it imports the driver and the Kafka client."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from bridge.build_info import version_text

        print(version_text())
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or, when `argv` names one, of that command only: a worker
    process then does not import the emulator, the stack or Spark (0.27 CPU-s of its start-up)."""
    parser = argparse.ArgumentParser(
        prog="cdc-bridge",
        description="ScyllaDB CDC to Kafka (Debezium envelopes, exactly once) and on to Spark.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and the hot path's libraries")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = next((a for a in argv or () if not a.startswith("-")), None)
    # A product command needs no look at the installed plugins (importlib.metadata reads every
    # installed distribution's metadata: 0.1 s of `cdc-bridge offsets show`).
    table = _COMMANDS if named in _COMMANDS else _command_table()
    modules = [table[named]] if named in table else list(dict.fromkeys(table.values()))
    for module in modules:
        importlib.import_module(module).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)

