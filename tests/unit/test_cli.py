"""The `cdc-bridge` parser: every command, and one command alone when argv names it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from bridge.cli import _COMMANDS, _command_table, build_parser

pytestmark = pytest.mark.unit


def _commands(parser: object) -> set[str]:
    actions = [a for a in parser._subparsers._group_actions]  # type: ignore[attr-defined]
    return set(actions[0].choices)


def test_the_command_table_names_every_registered_command() -> None:
    assert _commands(build_parser()) == set(_command_table())


def test_the_development_distribution_adds_stack_sim_and_demo_as_plugins() -> None:
    assert not {"stack", "sim", "demo"} & set(_COMMANDS)  # not the product's own
    table = _command_table()
    assert {name: table[name] for name in ("stack", "sim", "demo")} == {
        name: f"bridge_devstack.cli.{name}" for name in ("stack", "sim", "demo")}


def test_a_named_command_registers_its_own_module_only() -> None:
    assert _commands(build_parser(["run", "--config", "x"])) == {"run"}
    assert _commands(build_parser(["offsets", "show"])) == {"status", "offsets"}
    assert _commands(build_parser(["stack", "status"])) == {"stack"}
    assert _commands(build_parser(["--help"])) == set(_command_table())
    assert _commands(build_parser(["no-such-command"])) == set(_command_table())


def test_plugins_commands_are_read_beside_the_table_and_never_replace_a_product_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types
    from importlib.metadata import EntryPoint

    import bridge.cli

    plugin = types.ModuleType("cdc_bridge_test_plugin")
    plugin.register = lambda commands: commands.add_parser("hello").set_defaults(handler=lambda _: 7)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, plugin.__name__, plugin)
    found = [EntryPoint("hello", plugin.__name__, bridge.cli.PLUGIN_GROUP),
             EntryPoint("run", plugin.__name__, bridge.cli.PLUGIN_GROUP)]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: found if group == bridge.cli.PLUGIN_GROUP else [])
    assert _commands(build_parser()) == {*_COMMANDS, "hello"}
    assert _commands(build_parser(["hello"])) == {"hello"}
    assert bridge.cli.main(["hello"]) == 7
    assert _commands(build_parser(["run", "--config", "x"])) == {"run"}


def test_a_product_command_starts_without_reading_the_installed_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading every installed distribution's metadata cost 0.1 s of `cdc-bridge offsets show`."""
    def refuse(group: str) -> list[object]:
        raise AssertionError("entry points read")

    monkeypatch.setattr(importlib.metadata, "entry_points", refuse)
    assert _commands(build_parser(["offsets", "show", "--config", "x"])) == {"status", "offsets"}


def test_a_kafka_command_does_not_import_the_metrics_server_or_the_envelope() -> None:
    """The packages' names are imported when first used (bridge/observability, bridge/envelope):
    `cdc-bridge offsets show` loads neither prometheus_client nor the envelope's translators."""
    code = ("import sys; from bridge.cli import build_parser; from bridge.settings.load import load_config; "
            "build_parser(['offsets', 'show', '--config', 'x']); "
            "print(sorted(m for m in sys.modules if m.startswith(('prometheus_client', 'bridge.envelope.translat', "
            "'bridge.observability.http'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_worker_command_does_not_import_the_emulator_stack_or_spark() -> None:
    code = ("import sys; from bridge.cli import build_parser; build_parser(['run', '--config', 'x']); "
            "print(sorted(m for m in sys.modules if m.startswith(('bridge_devstack', 'bridge.spark'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_version_names_the_hot_paths_libraries_and_whether_the_drivers_row_parser_is_compiled() -> None:
    from cassandra import cython_deps

    out = subprocess.run([sys.executable, "-m", "bridge.cli", "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("cdc-bridge ") and "bridge_code: pure Python" in out
    parser = "compiled (Cython)" if cython_deps.HAVE_CYTHON else "pure Python (slow)"
    assert f"driver_row_parser: {parser}" in out and "librdkafka: " in out
