"""bench/results.json is the one source of the benchmark figures: bench/README.md's table is
generated from it, every key the docs name as a benchmark key has an entry there, and
`record` (what each script's --record calls) merges keys with their provenance."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import results

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A benchmark key as the docs write it: a backticked snake_case name with a figure's suffix
# (`spark_mirror_rows_per_s`, `latency_overhead_p99_s`, `peer_cpu_ratio.<mix>`, `spark_flatten_*`).
KEY = re.compile(r"`([a-z][a-z0-9_]*(?:_per_s|_per_cpu_s|_per_s_avro|_1core|_ratio|_p50_s|_p99_s|_max_s|_batch_s"
                 r"|_overhead_s|_rss_mb|_first_batch_s)(?:\.[a-z0-9_<>%*]+)*|[a-z][a-z0-9_]*_\*)`")


NOT_BENCH_KEYS = {"rows_per_s"}  # a field of the Spark jobs' `micro-batch done` log line (docs/spark.md)


def named_keys() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        for name in KEY.findall(doc.read_text()):
            if name not in NOT_BENCH_KEYS:
                found.setdefault(name, []).append(str(doc.relative_to(ROOT)))
    return found


def exists(name: str, keys: dict[str, object]) -> bool:
    """`a_*`, `a.<mix>` and `a` of keys `a.x` name a family: some key must start with its stem."""
    stem = re.split(r"\*|<", name, maxsplit=1)[0]
    if stem != name:
        return any(key.startswith(stem) for key in keys)
    return name in keys or any(key.startswith(f"{name}.") for key in keys)


def test_readme_table_is_generated_from_results_json() -> None:
    text = results.README.read_text()
    assert results.rendered(text, results.load()) == text, "run: python -m bench.results --table"
    assert len(text.splitlines()) <= 300


def test_every_key_the_docs_name_has_a_current_figure() -> None:
    keys = results.load()["keys"]
    named = named_keys()
    assert "spark_mirror_rows_per_s" in named  # the rule finds the keys it is meant for
    missing = {name: docs for name, docs in named.items() if not exists(name, keys)}
    assert missing == {}, "named in the docs, absent from bench/results.json"


def test_every_entry_says_where_its_figure_comes_from() -> None:
    for name, entry in results.load()["keys"].items():
        assert set(entry) >= {"value", "bench", "date", "commit", "command", "machine"}, name
        assert entry["value"] is None or isinstance(entry["value"], int | float), name
        unknown = entry["commit"] is None or entry["command"] is None or entry["value"] is None
        assert not unknown or "unknown" in entry.get("note", "") or (entry["value"] is None and entry.get("note")), name


def test_record_merges_keys_with_their_provenance(tmp_path: Path) -> None:
    path, readme = tmp_path / "results.json", tmp_path / "README.md"
    path.write_text(json.dumps({"about": "x", "keys": {"kept_per_s": {"value": 1, "bench": "b", "date": "d",
                                                                      "commit": "c", "command": "k",
                                                                      "machine": {}}}}))
    readme.write_text(f"top\n{results.BEGIN}\nold\n{results.END}\nbottom\n")
    results.record({"x_per_s": 12.5, "ceilings": {"y_per_s": 3}}, "python bench/x_bench.py --n 3",
                   path=path, readme=readme)
    keys = json.loads(path.read_text())["keys"]
    assert set(keys) == {"kept_per_s", "x_per_s", "ceilings.y_per_s"}
    entry = keys["x_per_s"]
    assert (entry["value"], entry["bench"]) == (12.5, "x_bench")
    assert entry["command"] == "python bench/x_bench.py --n 3"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", entry["date"]) and entry["machine"]["cores"] >= 1
    assert entry["commit"]
    text = readme.read_text()
    assert text.startswith("top\n") and text.endswith("bottom\n") and "| `x_per_s` | 12.5 | x_bench |" in text
    with pytest.raises(ValueError, match="note"):
        results.record({"z_p99_s": None}, "k", path=path, readme=None)
    results.record({"z_p99_s": None}, "k", note="not measured yet: the bench lands with issue 41", path=path,
                   readme=None)
    assert json.loads(path.read_text())["keys"]["z_p99_s"]["value"] is None


def test_record_report_takes_a_scripts_headline_keys(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    report = {"rows_per_s_overall": 4918, "overhead": {"one_record_batch_s": [7.9, 4.2]}, "oom": False,
              "us_per_envelope": {"page": 5.9, "decode": 6.0}}
    results.record_report(report, {"spark_mirror_rows_per_s": "rows_per_s_overall",
                                   "spark_mirror_batch_overhead_s": "overhead.one_record_batch_s",
                                   "stage_costs_us_per_envelope.": "us_per_envelope.", "absent_per_s": "nowhere",
                                   "oom_ratio": "oom"},
                          bench="spark_mirror_backlog", command="python bench/spark_bench.py", path=path, readme=None)
    keys = json.loads(path.read_text())["keys"]
    assert {k: v["value"] for k, v in keys.items()} == {
        "spark_mirror_rows_per_s": 4918, "spark_mirror_batch_overhead_s": 4.2,
        "stage_costs_us_per_envelope.page": 5.9, "stage_costs_us_per_envelope.decode": 6.0}
