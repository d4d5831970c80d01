"""The `sim` command line: every subcommand has --help, and the parser wires handlers."""

from __future__ import annotations

import argparse

import pytest

from bridge.sim import cli


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="cdc-bridge")
    cli.register(top.add_subparsers(dest="command", required=True))
    return top


@pytest.mark.parametrize(
    "words",
    [
        ["sim"],
        ["sim", "exec"],
        ["sim", "bootstrap-node"],
        ["sim", "tablets"],
        ["sim", "tablets", "split"],
        ["sim", "tablets", "merge"],
        ["sim", "tablets", "change"],
        ["sim", "load"],
    ],
)
def test_every_subcommand_has_help(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`--help` prints a usage line for the command and exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args([*words, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: cdc-bridge {' '.join(words)}" in capsys.readouterr().out


def test_arguments_reach_the_handlers() -> None:
    """Parsed arguments carry the handler and the options each subcommand needs."""
    args = parser().parse_args(["sim", "tablets", "change", "ks", "t", "--positions", "0,2", "--split", "--delay", "1"])
    assert args.handler is cli._tablets and args.positions == "0,2" and args.split and args.delay == 1.0
    args = parser().parse_args(["sim", "exec", "-f", "x.cql", "--vnodes-keyspace", "meta"])
    assert args.handler is cli._exec and args.file == "x.cql" and cli._settings(args).vnodes_keyspace == "meta"
    with pytest.raises(SystemExit):
        parser().parse_args(["sim", "exec", "UPDATE t SET v = 1 WHERE pk = 1", "-f", "x.cql"])


def test_bad_settings_are_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad keyspace name in a flag stops with one line naming the setting."""
    code = cli.main(["bootstrap-node", "--vnodes-keyspace", "bad-name!"])
    assert code == 2
    assert capsys.readouterr().err.strip() == "error: vnodes_keyspace: 'bad-name!' is not a valid keyspace name"
