"""The worker's interpreter settings (bridge/runtime_tuning.py); their effect is measured by
bench/worker_bench.py."""

from __future__ import annotations

import gc
import sys

import pytest

from bridge.worker.tuning import SWITCH_INTERVAL_S, THRESHOLDS, tune_for_streaming


def test_tuning_freezes_the_start_up_heap_makes_collections_rare_and_slices_longer() -> None:
    before, interval = gc.get_threshold(), sys.getswitchinterval()
    try:
        survivor = [object()]  # alive at "start-up": must end up frozen, out of the collector's walks
        tune_for_streaming()
        assert gc.get_threshold() == THRESHOLDS
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)  # kept in microseconds
        assert gc.get_freeze_count() > 0
        assert gc.is_tracked(survivor)
        assert all(o is not survivor for o in gc.get_objects())  # the walked generations lack it
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        sys.setswitchinterval(interval)
