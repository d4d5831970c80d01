"""`cdc-bridge config describe|check`, and the `--config FILE --set key=value` options every
service command shares."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bridge.config import BridgeConfig, ConfigError, load_config, parse_sets


def add_config_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--config", type=Path, required=required, metavar="FILE",
                        help="settings file (.properties or .yaml); CDC_BRIDGE_<KEY> variables override it")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting for this run (repeatable)")


def config_from_args(args: argparse.Namespace) -> BridgeConfig | None:
    """The validated settings, or None after printing `error: <key>: <reason>` to stderr."""
    try:
        return load_config(args.config, overrides=parse_sets(args.set))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def render_reference() -> str:
    """The settings reference as a Markdown table, from the model's own fields."""
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    for name, info in BridgeConfig.model_fields.items():
        default = "(required)" if info.is_required() else ("" if info.default is None else str(info.default))
        if isinstance(info.default, bool):
            default = str(info.default).lower()
        lines.append(f"| `{info.alias or name}` | {default} | {info.description or ''} |")
    return "\n".join(lines)


def register(commands: Any) -> None:
    config = commands.add_parser("config", help="describe or check the worker's settings")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    describe = actions.add_parser("describe", help="every setting: effective value, default, meaning")
    add_config_arguments(describe, required=False)
    describe.set_defaults(handler=_describe)
    check = actions.add_parser("check", help="validate a settings file (exit 2 with the reason)")
    add_config_arguments(check)
    check.set_defaults(handler=_check)
    reference = actions.add_parser("reference", help="the settings reference as Markdown")
    reference.set_defaults(handler=lambda _args: print(render_reference()) or 0)


def _describe(args: argparse.Namespace) -> int:
    if args.config is None and not args.set:
        print(render_reference())
        return 0
    config = config_from_args(args)
    if config is None:
        return 2
    for key, value, default, meaning in config.describe():
        print(f"{key} = {value}    # default: {default or '-'}; {meaning}")
    return 0


def _check(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config is None:
        return 2
    print(f"{args.config}: valid ({len(config.tables())} tables, topic prefix {config.topic_prefix})")
    return 0
