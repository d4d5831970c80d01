"""`cdc-bridge config describe|check|reference`: the settings, effective, validated or as a reference."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bridge.cli.arguments import add_config_arguments, config_from_args
from bridge.observability.logs import mask_text
from bridge.settings import BridgeConfig, ConfigError
from bridge.settings.reference import render_reference, update_reference


def register(commands: Any) -> None:
    config = commands.add_parser("config", help="describe or check the worker's settings")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    describe = actions.add_parser("describe", help="every setting: effective value, default, meaning")
    add_config_arguments(describe, required=False)
    describe.set_defaults(handler=_describe)
    check = actions.add_parser("check", help="validate a settings file (exit 2 with the reason)",
                               description="Validate the settings as `cdc-bridge run` would before it starts. "
                                           "With cdc.include.before/after other than none it connects to the "
                                           "cluster to check each table's CDC image options.")
    add_config_arguments(check)
    check.add_argument("--offline", action="store_true",
                       help="do not connect to the cluster (skip the tables' CDC option checks)")
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
    from bridge.settings.checks import check_as_run_would, needs_cluster_checks

    try:
        check_as_run_would(config)
        missing = _check_tables(config) if needs_cluster_checks(config) and not args.offline else []
    except ConfigError as error:
        print(mask_text(f"error: {error}"), file=sys.stderr)
        return 2
    for table in missing:
        print(f"warning: scylla.table.names: table {table} does not exist (yet); cdc-bridge run refuses it "
              "until it does", file=sys.stderr)
    print(f"{args.config}: valid ({len(config.tables())} tables, topic prefix {config.topic_prefix})")
    return 0


def _check_tables(config: BridgeConfig) -> list[str]:
    """The tables' CDC options over a session of our own, as `run` checks them."""
    from bridge.observability import register_secret
    from bridge.scylla.session import ClusterUnavailableError, CqlAccessError, connect
    from bridge.settings.checks import check_tables_as_run_would

    register_secret(config.scylla_password_value())  # masked if a driver error echoes it
    try:
        cluster, session = connect(config.scylla_contact_points(), user=config.scylla_user,
                                   password=config.scylla_password_value(), local_dc=config.local_dc,
                                   ssl_context=config.scylla_ssl_context())
    except CqlAccessError as error:
        raise ConfigError(error.key, error.reason) from None
    except ClusterUnavailableError as error:
        raise ConfigError("scylla.cluster.ip.addresses", f"{error} (--offline skips the tables' checks)") from None
    try:
        return check_tables_as_run_would(config, session)
    except ConfigError:
        raise
    except Exception as error:
        raise ConfigError("scylla.cluster.ip.addresses", f"reading the tables' CDC options: {error}") from None
    finally:
        cluster.shutdown()
