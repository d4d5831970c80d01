"""The worker's report of changes carried without an image their advanced-format mode asked for:
a Prometheus counter per table and image, and at most one warning line per table a minute."""

from __future__ import annotations

import structlog
from prometheus_client import generate_latest

from bridge.observability.metrics import Metrics
from bridge.worker.missing_images import MissingImages


def test_counts_every_missing_image_and_logs_once_a_minute_per_table() -> None:
    metrics = Metrics()
    now = [100.0]
    report = MissingImages(metrics, clock=lambda: now[0])
    with structlog.testing.capture_logs() as logs:
        report.note("ks", "t", "g1", {"before": 1, "after": 1})
        now[0] += 10
        report.note("ks", "t", "g1", {"after": 2})
        report.note("ks", "other", "g2", {"before": 1})
        now[0] += 55
        report.note("ks", "t", "g1", {"after": 1})
        report.note("ks", "t", "g1", {})
    text = generate_latest(metrics.registry).decode()
    assert 'cdc_bridge_missing_images_total{image="after",keyspace="ks",table="t"} 4.0' in text
    assert 'cdc_bridge_missing_images_total{image="before",keyspace="ks",table="t"} 1.0' in text
    assert 'cdc_bridge_missing_images_total{image="before",keyspace="ks",table="other"} 1.0' in text
    lines = [(e["table"], e["missing_before"], e["missing_after"], e["since_s"]) for e in logs]
    # the first line at once; the next one a minute later with the counts since the first
    assert lines == [("t", 1, 1, None), ("other", 1, 0, None), ("t", 0, 3, 65.0)]
    assert all(e["log_level"] == "warning" and e["keyspace"] == "ks" for e in logs)
