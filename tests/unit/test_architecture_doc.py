"""docs/architecture.md matches the code: every file it names exists, and the path of one log row
is at most eight files, none of them visited twice."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()
_PATH = re.compile(r"`((?:devstack/bridge_devstack|bridge)/[\w/]+\.py)`")


def _section(title: str) -> str:
    start = DOC.index(title)
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def test_every_file_the_page_names_exists() -> None:
    named = set(_PATH.findall(DOC))
    assert len(named) > 20
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []


def test_the_row_path_is_at_most_eight_files_in_order_without_going_back() -> None:
    section = _section("## A CDC log row")
    stops = re.findall(r"^\d+\. \*\*`(bridge/[\w/]+\.py)`\*\*", section, flags=re.M)
    assert 5 <= len(stops) <= 8
    assert len(stops) == len(set(stops))
    # A file named as a helper of one stop is not a later stop: the reader never goes back.
    for index, stop in enumerate(stops):
        earlier_text = section.split(f"**`{stop}`**")[0]
        assert f"`{stop}`" not in earlier_text, f"{stop} is named before its own stop {index + 1}"


def test_the_spark_path_names_both_jobs_files() -> None:
    section = _section("## A Kafka record through")
    assert "bridge/spark/flatten/flatten.py" in section and "bridge/spark/mirror/writer.py" in section
