"""The `--config FILE --set key=value` options every service command shares."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bridge.settings import BridgeConfig, ConfigError, load_config, parse_sets


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
