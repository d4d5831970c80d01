"""The Grafana dashboard under deploy/ shows every metric the worker serves, and only those."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bridge.observability.metrics import Metrics

DASHBOARD = Path(__file__).parents[3] / "deploy" / "grafana" / "scylla-cdc-bridge.json"


def served_names() -> set[str]:
    """The sample names /metrics shows (counters with `_total`, histograms with `_bucket`, ...)."""
    metrics = Metrics()
    metrics.declare_tables([("ks", "t")])
    families = list(metrics.registry.collect())
    gauges = {family.name for family in families if family.type == "gauge"}  # labelled: no sample until set
    return gauges | {sample.name for family in families for sample in family.samples}


def test_every_dashboard_query_names_a_served_metric_and_every_metric_is_shown() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"cdc_bridge_[a-z_]+", expr)}
    served = served_names()
    assert used - served == set(), "the dashboard queries metrics the worker does not serve"
    families = {re.sub(r"_(total|bucket|count|sum|created)$", "", name) for name in served}
    shown = {re.sub(r"_(total|bucket|count|sum|created)$", "", name) for name in used}
    assert families - shown == set(), "metrics no panel shows"
