"""Catch-up arithmetic and the terminal progress line."""

from __future__ import annotations

import io

from bridge.observability.progress import CatchUp, ProgressLine, duration, progress_text


def test_rate_shrink_and_eta_from_samples() -> None:
    catch_up = CatchUp(window_s=30)
    assert catch_up.eta_s() is None and catch_up.records_per_s() is None
    catch_up.add(0.0, 3600.0, 0)
    catch_up.add(10.0, 3000.0, 50_000)  # 600 s of log gone in 10 s: 60 s/s
    assert catch_up.records_per_s() == 5000
    assert catch_up.shrink_per_s() == 60
    assert catch_up.eta_s() == 50  # 3000 s left at 60 s/s
    text = progress_text(catch_up, groups=12)
    assert text == ("catching up: 50m00s of log behind (12 groups), 5,000 records/s, reading 61.0x real time, "
                    "ETA 50s")


def test_a_backlog_that_does_not_shrink_has_no_eta() -> None:
    catch_up = CatchUp()
    catch_up.add(0.0, 100.0, 0)
    catch_up.add(5.0, 104.0, 10)
    assert catch_up.eta_s() is None
    assert progress_text(catch_up, 1).endswith("ETA ? (not gaining)")


def test_old_samples_leave_the_window() -> None:
    catch_up = CatchUp(window_s=10)
    catch_up.add(0.0, 1000.0, 0)  # a fast start that is no longer true
    for t in range(1, 31):
        catch_up.add(float(t), 10.0, 0)
    assert catch_up.shrink_per_s() == 0
    assert catch_up.eta_s() is None


def test_durations() -> None:
    assert [duration(s) for s in (None, 0, 59.4, 61, 3725, 90_061)] == ["?", "0s", "59s", "1m01s", "1h02m",
                                                                       "1d01h"]


def test_the_line_shows_only_on_a_terminal_and_only_while_behind() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    plain = io.StringIO()
    line = ProgressLine(plain)
    behind = CatchUp()
    behind.add(0, 500, 0)
    behind.add(1, 400, 10)
    line.update(behind, 3)
    assert plain.getvalue() == ""

    tty = Tty()
    line = ProgressLine(tty, threshold_s=10)
    line.update(behind, 3)
    assert tty.getvalue().startswith("\r\033[Kcatching up: 6m40s of log behind (3 groups)")
    line.clear()
    assert tty.getvalue().endswith("\r\033[K")
    caught_up = CatchUp()
    caught_up.add(0, 2, 0)
    size = len(tty.getvalue())
    line.update(caught_up, 3)
    assert len(tty.getvalue()) == size  # nothing shown, nothing to clear
