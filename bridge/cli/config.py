"""`cdc-bridge config describe|check|reference`: the settings, effective, validated or as a reference."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bridge.cli.arguments import add_config_arguments, config_from_args
from bridge.observability.logs import mask_text
from bridge.settings import ConfigError
from bridge.settings.reference import render_reference, update_reference


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
    reference.add_argument("--update", type=Path, metavar="FILE", action="append",
                           help="rewrite what is generated in FILE instead of printing: the reference block of a "
                                "Markdown file (README.md), the config schema of the chart's values.schema.json "
                                "(repeatable)")
    reference.set_defaults(handler=_reference)


def _reference(args: argparse.Namespace) -> int:
    if not args.update:
        print(render_reference())
        return 0
    from bridge.settings.chart_schema import update_chart_schema

    for path in args.update:
        try:
            changed = update_chart_schema(path) if path.suffix == ".json" else update_reference(path)
        except (ConfigError, OSError, ValueError, KeyError) as error:
            print(f"error: {path}: {error}", file=sys.stderr)
            return 2
        print(f"{path}: {'updated' if changed else 'already up to date'}")
    return 0


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
    from bridge.settings.checks import check_as_run_would

    try:
        check_as_run_would(config)
    except ConfigError as error:
        print(mask_text(f"error: {error}"), file=sys.stderr)
        return 2
    print(f"{args.config}: valid ({len(config.tables())} tables, topic prefix {config.topic_prefix})")
    return 0
