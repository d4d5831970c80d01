"""The mirror against its source, at a backlog's size (issue 31's acceptance: the documented
command with no tuning flag over >= 300,000 JSON-with-schemas records: exact, no OOM).

A realistic backlog (bridge/sim/backlog.py: inserts, partial updates, element changes, row,
range and partition deletes, multi-row writes) is written with its base rows, so that Cassandra
holds each table's final state, into `--partitions` partitions of up to 20 rows (the default,
50,000, gave 194,272 rows for 300,000 changes). A real worker carries it to Kafka (JSON
with schemas) and `cdc-bridge spark mirror ... --available-now` runs with its defaults, as
`bench/spark_mirror_backlog.py` runs and measures it. Then every row of both Delta tables is
compared with Cassandra's, cell for cell.

    .venv/bin/python bench/spark_mirror_exact.py --changes 300000

Prints the mirror bench's report with `exact`: per table the rows on each side and the first
differences.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_mirror_backlog import TABLES, mirror_backlog
from worker_bench import fill_backlog

KEY = ("pk", "ck")


def canonical(value: Any) -> Any:
    """A driver's or a Delta row's value in one comparable form: empty collections are null (as
    in CQL), sets sorted, uuids and decimals as text, timestamps as epoch milliseconds."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):  # the mirror keeps a decimal as the envelope's text
        return str(value)
    if hasattr(value, "items"):
        return {k: canonical(v) for k, v in value.items()} or None
    if isinstance(value, list | tuple | set | frozenset) or type(value).__name__ == "SortedSet":
        return sorted(canonical(v) for v in value) or None
    return value


def cassandra_rows(session: Any, keyspace: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    rows = {}
    for row in session.execute(f"SELECT * FROM {keyspace}.{table}"):
        values = {name: canonical(getattr(row, name)) for name in row._fields}
        rows[tuple(values[k] for k in KEY)] = values
    return rows


def delta_rows(spark: Any, path: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return frame_rows(spark.read.format("delta").load(path))


def frame_rows(frame: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A Spark frame's rows (a Delta table, or `current_state`'s view) by key, `_cdc_*` left out."""
    columns = [c for c in frame.columns if not c.startswith("_cdc_")]
    rows = {}
    for row in frame.select(*columns).toLocalIterator():
        values = {name: canonical(row[name]) for name in columns}
        rows[tuple(values[k] for k in KEY)] = values
    return rows


def differences(source: dict[Any, Any], mirror: dict[Any, Any], limit: int = 5) -> dict[str, Any]:
    differing = sorted((k for k in set(source) | set(mirror) if source.get(k) != mirror.get(k)), key=str)
    return {"rows": len(source), "mirror_rows": len(mirror), "differing": len(differing),
            "first": [f"{k}: source {source.get(k)} mirror {mirror.get(k)}" for k in differing[:limit]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=50_000, help="of `wide` (`imaged` has a twentieth)")
    parser.add_argument("--keyspace", help="reuse the keyspace an earlier run filled (carried again, new topics)")
    args = parser.parse_args()

    from cassandra.cluster import Cluster

    from bridge.sim.emulator import Emulator
    from bridge.spark.session import build_session
    from bridge.stack.manager import StackManager

    endpoints = StackManager.default().endpoints
    keyspace = args.keyspace or f"exact_{uuid.uuid4().hex[:8]}"
    if not args.keyspace:
        with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emu:
            fill = fill_backlog(emu, keyspace, args.changes, "realistic", base=True, partitions=args.partitions)
        print(json.dumps({"fill": fill}), flush=True)
    result = mirror_backlog(endpoints, args.changes, keyspace, None, [], None, None)
    spark = build_session("local[2]", app_name="cdc-bridge-bench-exact")
    cluster = Cluster([endpoints.cassandra_host], port=endpoints.cassandra_port)
    try:
        session = cluster.connect()
        result["exact"] = {table: differences(cassandra_rows(session, keyspace, table),
                                              delta_rows(spark, f"{result['delta']}/{keyspace}/{table}"))
                           for table in TABLES}
    finally:
        cluster.shutdown()
        spark.stop()
    print(json.dumps(result, indent=1, default=str))
    return 0 if all(t["differing"] == 0 for t in result["exact"].values()) and not result["oom"] else 1


if __name__ == "__main__":
    sys.exit(main())
