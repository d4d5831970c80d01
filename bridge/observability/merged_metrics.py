"""The metrics of several worker processes as one exposition: each child's `/metrics` text parsed
and its series given the label `worker_process="<i>"`, families of the same name joined, so each
family has one HELP and one TYPE line however many children export it (Prometheus refuses a
family declared twice). Pure over the texts; the supervisor (bridge/worker/supervisor.py) fetches
them at each scrape through `MergedCollector`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

LABEL = "worker_process"


def merge_expositions(texts: Mapping[str, str]) -> list[Metric]:
    """The families of every child's exposition text (keyed by its index), each sample labelled
    with its child; in the order families first appear, children in key order."""
    merged: dict[str, Metric] = {}
    for child in sorted(texts, key=_index_order):
        for family in text_string_to_metric_families(texts[child]):
            target = merged.get(family.name)
            if target is None:
                target = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                target.samples.append(Sample(sample.name, {**sample.labels, LABEL: child}, sample.value,
                                             sample.timestamp, sample.exemplar))
    return list(merged.values())


def _index_order(child: str) -> tuple[int, str]:
    return (int(child), "") if child.isdigit() else (1 << 30, child)


class MergedCollector(Collector):
    """Collects the merged families of whatever `fetch` returns (index -> exposition text) at
    each scrape; a child that did not answer is simply absent from that scrape."""

    def __init__(self, fetch: Callable[[], Mapping[str, str]]) -> None:
        self._fetch = fetch

    def describe(self) -> list[Metric]:
        return []  # nothing to declare at registration: the families are the children's, known at scrape

    def collect(self) -> Iterator[Metric]:
        yield from merge_expositions(self._fetch())
