"""The history job (SCD type 2) over the mirror bench's backlog, with the documented command and
its defaults, beside the mirror's figures (`bench/spark_mirror_backlog.py` fills the backlog).

    .venv/bin/python bench/spark_history_backlog.py --topics W,I,D [--max-batches K] [--converter avro]
    .venv/bin/python bench/spark_history_backlog.py --changes 1000000     # fills a backlog first
    .venv/bin/python bench/spark_history_backlog.py --keyspace K --converter avro   # carries K's fill again

`cdc-bridge spark history --config F --checkpoint D --output P --available-now` runs as its own
process; measured: overall rows/s (input records over the query's time, session start excluded),
rows per CPU-second of its process tree, micro-batches, JVM peak RSS, OutOfMemoryError. Needs the
local stack; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_flatten_backlog import CLI
from spark_flatten_backlog import _events as events_of
from spark_flatten_backlog import _run as run_cli
from spark_flatten_backlog import _timestamp as timestamp_of
from spark_mirror_backlog import backlog

from bridge.stack.manager import StackManager


def history_backlog(endpoints: Any, changes: int, topics_from: str | None, max_batches: int | None,
                    converter: str = "json", keyspace: str | None = None) -> dict[str, Any]:
    run = backlog(endpoints, changes, keyspace, topics_from, "spark-history-bench-", converter)
    topics, folder, config, inputs = run.topics, run.folder, run.config, run.inputs
    documented = ["--config", str(config), "--checkpoint", str(folder / "checkpoint"), "--output",
                  str(folder / "history")]
    log = folder / "history.log"

    def enough() -> bool:
        done = sum(1 for e in events_of(log) if e.get("event") == "micro-batch done" and "rows" in e)
        return max_batches is not None and done >= max_batches

    CLI[-1] = "history"
    load_before = os.getloadavg()
    run = run_cli([*documented, "--available-now"], log, until=enough, timeout_s=4 * 3600)
    events = events_of(log)
    batches = [e for e in events if e.get("event") == "micro-batch done" and "rows" in e]
    started = next((e for e in events if e.get("event") == "query started"), None)
    rows = sum(int(b["rows"]) for b in batches)
    result: dict[str, Any] = {
        "bench": "spark_history_backlog", "converter": converter, "topics": topics,
        "input_offsets_incl_markers": inputs, "input_records": rows,
        "command": "cdc-bridge spark history " + " ".join(documented) + " --available-now",
        **run, "micro_batches": len(batches), "oom": "OutOfMemoryError" in log.read_text(errors="replace"),
        "error_lines": [line for line in log.read_text(errors="replace").splitlines() if line.startswith("error: ")],
        "batches": [{"id": b["batch_id"], "rows": b["rows"], "s": b["duration_s"]} for b in batches],
    }
    if batches and started:
        query_s = timestamp_of(batches[-1]) - timestamp_of(started)
        result.update({"query_s": round(query_s, 1), "spark_history_rows_per_s": round(rows / query_s),
                       "rows_per_cpu_s": round(rows / run["cpu_s"]) if run["cpu_s"] else None})
    result["load_average_before"] = load_before
    result["load_average_after"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000, help="backlog to fill (without --topics)")
    parser.add_argument("--topics", help="reuse the topics of an earlier mirror bench run (W,I,D)")
    parser.add_argument("--max-batches", type=int, help="stop after this many micro-batches")
    parser.add_argument("--converter", choices=("json", "avro"), default="json",
                        help="the backlog's format: JSON with schemas, or Avro through the registry")
    parser.add_argument("--keyspace", help="carry an earlier fill's keyspace again (without --topics)")
    parser.add_argument("--record", action="store_true", help="merge the spark_history_* keys into bench/results.json")
    args = parser.parse_args()
    endpoints = StackManager.default().endpoints
    result = history_backlog(endpoints, args.changes, args.topics, args.max_batches, args.converter, args.keyspace)
    print(json.dumps(result, indent=1))
    if args.record:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.results import record_report

        if args.converter == "avro":
            picks = {"spark_history_rows_per_s_avro": "spark_history_rows_per_s"}
        else:
            picks = {k: k for k in ("spark_history_rows_per_s", "spark_history_rows_per_cpu_s", "spark_history_records",
                                    "spark_history_jvm_peak_rss_mb")}
        record_report(result, picks, bench="spark_history_backlog")


if __name__ == "__main__":
    main()
