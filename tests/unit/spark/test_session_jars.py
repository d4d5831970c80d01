"""The list of resolved jars a local session loads instead of asking Ivy again: used only while
every jar on it is still in the cache, written whole."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bridge.spark.core import session


@pytest.fixture
def ivy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CDC_BRIDGE_IVY_DIR", str(tmp_path))
    return tmp_path


def _session_with_jars(jars: str) -> SimpleNamespace:
    conf = SimpleNamespace(get=lambda key, default="": jars if key == "spark.jars" else default)
    return SimpleNamespace(sparkContext=SimpleNamespace(getConf=lambda: conf))


def test_no_list_until_a_session_resolved_the_packages(ivy: Path) -> None:
    assert session.resolved_jars() is None


def test_the_jars_a_session_resolved_are_loaded_next_time(ivy: Path) -> None:
    jars = [ivy / "jars" / "a.jar", ivy / "jars" / "b.jar"]
    for jar in jars:
        jar.parent.mkdir(exist_ok=True)
        jar.write_bytes(b"PK")
    listed = ",".join(f"file://{jar}" for jar in jars)
    session._remember_jars(_session_with_jars(listed))
    assert session.resolved_jars() == listed
    assert not list(ivy.glob("*.partial"))


def test_a_jar_gone_from_the_cache_sends_the_session_back_to_ivy(ivy: Path) -> None:
    kept, gone = ivy / "a.jar", ivy / "b.jar"
    kept.write_bytes(b"PK")
    session._remember_jars(_session_with_jars(f"file://{kept},file://{gone}"))
    assert session.resolved_jars() is None


def test_a_list_is_per_set_of_packages(ivy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = ivy / "a.jar"
    jar.write_bytes(b"PK")
    session._remember_jars(_session_with_jars(f"file://{jar}"))
    monkeypatch.setattr(session, "packages", lambda: ["org.example:other:1.0"])
    assert session.resolved_jars() is None
