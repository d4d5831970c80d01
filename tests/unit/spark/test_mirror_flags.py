"""The mirror's compaction flags are refused at the command line, before a Spark session starts."""

from __future__ import annotations

import pytest

from bridge.spark.command import main


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_a_bad_compact_after_seconds_stops_start_up_naming_the_flag(value: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["mirror", "--delta", "/nowhere", "--checkpoint", "/nowhere", "--compact-after-seconds", value])
    assert stopped.value.code == 2
    assert "argument --compact-after-seconds:" in capsys.readouterr().err


def test_a_good_compact_after_seconds_is_read_as_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    import bridge.spark.runner as runner

    seen: dict[str, object] = {}
    monkeypatch.setattr(runner, "run_mirror", lambda job, **flags: seen.update(flags) or 0)
    assert main(["mirror", "--delta", "/nowhere", "--checkpoint", "/nowhere", "--compact-after-seconds", "2.5"]) == 0
    assert seen["compact_after_s"] == 2.5
