"""Settings that were silently accepted or ended in a traceback on ffd4452, each now refused in one
line naming the setting (or read as Kafka Connect reads it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bridge.settings import ConfigError, load_config
from bridge.settings.load import build_config, read_file
from tests.unit.test_config import BASE, with_


def _refused(props: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as raised:
        build_config(props)
    return str(raised.value)


def test_a_typo_in_an_environment_variable_is_refused_naming_the_closest_setting() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, overrides=BASE, environ={"CDC_BRIDGE_SCYLLA_TABEL_NAMES": "ks.t"})
    assert str(raised.value) == ("CDC_BRIDGE_SCYLLA_TABEL_NAMES: unknown setting in the environment: did you mean "
                                 "CDC_BRIDGE_SCYLLA_TABLE_NAMES (scylla.table.names)?")
    # the stack's, the emulator's and the Spark jobs' own variables are not settings
    assert load_config(None, overrides=BASE, environ={"CDC_BRIDGE_STACK_PORT_OFFSET": "100",
                                                      "CDC_BRIDGE_SIM_NODES": "3"}).name == "c1"


def test_no_table_a_zero_confidence_window_and_tls_files_without_tls_are_refused(tmp_path: Path) -> None:
    assert _refused(with_(scylla__table__names=",")).startswith("scylla.table.names: ',' names no keyspace.table")
    assert _refused(with_(scylla__confidence__window__size="0")).startswith("scylla.confidence.window.size: ")
    assert _refused(with_(scylla__ssl__truststore__path=str(tmp_path / "ca.pem"))) == (
        "scylla.ssl.enabled: false, but scylla.ssl.truststore.path is set: set scylla.ssl.enabled=true to use "
        "TLS, or remove the TLS files")


def test_latin1_properties_and_a_byte_order_mark_are_read_as_java_reads_them(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name=caf\xe9\ntopic.prefix=\\u00e9t\xe9\n".encode("latin-1"))
    assert read_file(latin1) == {"name": "café", "topic.prefix": "été"}
    bom = tmp_path / "bom.properties"
    bom.write_bytes(b"\xef\xbb\xbfname=c1\ntopic.prefix=p\n")
    assert read_file(bom) == {"name": "c1", "topic.prefix": "p"}


def _check(path: Path, *lines: str) -> subprocess.CompletedProcess[str]:
    path.write_text("\n".join(f"{key}={value}" for key, value in BASE.items()) + "\n" + "\n".join(lines) + "\n")
    return subprocess.run([sys.executable, "-m", "bridge.cli", "config", "check", "--config", str(path)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_config_check_is_as_strict_as_run(tmp_path: Path) -> None:
    """An unknown librdkafka setting and an unreadable secret file fail `config check`, not only `run`."""
    unknown = _check(tmp_path / "a.properties", "kafka.linger.msec=5")
    assert (unknown.returncode, unknown.stderr.count("\n")) == (2, 1), unknown.stderr
    assert unknown.stderr.startswith("error: kafka.linger.msec: "), unknown.stderr
    missing = _check(tmp_path / "b.properties", f"kafka.sasl.password.file={tmp_path / 'nope'}")
    assert (missing.returncode, missing.stderr.count("\n")) == (2, 1), missing.stderr
    assert missing.stderr.startswith("error: kafka.sasl.password.file: cannot read "), missing.stderr
    fine = _check(tmp_path / "c.properties", "kafka.linger.ms=5")
    assert fine.returncode == 0, fine.stderr


def test_the_failure_handling_mode_is_one_of_debeziums() -> None:
    assert _refused(with_(event__processing__failure__handling__mode="ignore")) == (
        "event.processing.failure.handling.mode: must be one of fail, warn, skip")
    assert build_config(with_(event__processing__failure__handling__mode="WARN")).failure_handling_mode == "warn"
