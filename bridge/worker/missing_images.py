"""Changes carried without an image their advanced-format mode asked for (`cdc.include.before` /
`cdc.include.after`, `Translation.missing_images`): counted in
`cdc_bridge_missing_images_total{keyspace,table,image}` and told in at most one warning line per
table a minute, with the counts since the table's last line.

The Java connector waits for such an image and, after `cdc.incomplete.task.timeout.ms`, drops
the change with an error line; the bridge sees whole records, knows the image will never come,
and emits the change with that image null instead (`bridge.envelope.advanced_translate`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping

import structlog

from bridge.observability.metrics import Metrics

log = structlog.get_logger(__name__)

LOG_INTERVAL_S = 60.0


class MissingImages:
    def __init__(self, metrics: Metrics, clock: Callable[[], float] = time.monotonic,
                 interval_s: float = LOG_INTERVAL_S) -> None:
        self._metrics = metrics
        self._clock = clock
        self._interval_s = interval_s
        self._unreported: dict[tuple[str, str], Counter[str]] = {}
        self._last_line: dict[tuple[str, str], float] = {}

    def note(self, keyspace: str, table: str, group: str, missing: Mapping[str, int]) -> None:
        """Count one translation's missing images; log when the table's minute has passed."""
        if not missing:
            return
        for image, count in missing.items():
            self._metrics.missing_images(keyspace, table, image, count)
        key = (keyspace, table)
        counts = self._unreported.setdefault(key, Counter())
        counts.update(missing)
        now = self._clock()
        last = self._last_line.get(key)
        if last is not None and now - last < self._interval_s:
            return
        log.warning("changes emitted with an image null: the record had no pre-/post-image row the "
                    "cdc.include mode needs (check the table's cdc preimage/postimage options)",
                    keyspace=keyspace, table=table, group=group,
                    missing_before=counts["before"], missing_after=counts["after"],
                    since_s=None if last is None else round(now - last, 1))
        self._last_line[key] = now
        counts.clear()
