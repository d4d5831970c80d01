"""The worker's GC settings (bridge/gc_policy.py); their effect is measured by bench/worker_bench.py."""

from __future__ import annotations

import gc

from bridge.gc_policy import THRESHOLDS, tune_for_streaming


def test_tuning_freezes_the_start_up_heap_and_makes_collections_rare() -> None:
    before = gc.get_threshold()
    try:
        survivor = [object()]  # alive at "start-up": must end up frozen, out of the collector's walks
        tune_for_streaming()
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > 0
        assert gc.is_tracked(survivor)
        assert all(o is not survivor for o in gc.get_objects())  # the walked generations lack it
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
