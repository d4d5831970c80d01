"""`cdc-bridge spark compact`: fold the mirror's pending changes into its Delta tables, as a
maintenance job beside (or instead of) the streaming mirror's own compactions, two tables at a
time as the mirror's own (`core.session.side_by_side`).

It folds one version of each changelog and removes exactly what it folded
(`mirror.changelog.ChangeLog.clear`), so a mirror appending meanwhile loses nothing. Two
compactions of one table at once (this command and the mirror's own) cannot both commit their
MERGE: Delta refuses the second with a concurrent-modification error, and this command then
tries that table again, after a pause, from the changelog's new version.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from bridge.spark.mirror.writer import MirrorWriter

log = structlog.get_logger(__name__)
ATTEMPTS = 5


def run_compact(root: str, tables: list[str], master: str | None, spark_log: Path | None, verbose: bool) -> int:
    """Compact `tables` (`keyspace.table`; default: every table with a changelog under `root`)."""
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.core.session import build_session, side_by_side
    from bridge.spark.mirror.writer import MirrorWriter
    from bridge.spark.runner import spark_log_file

    chosen = []
    for text in tables:
        keyspace, dot, table = text.partition(".")
        if not dot or not keyspace or not table:
            print(f"error: --table: {text!r} is not keyspace.table", file=sys.stderr)
            return 2
        chosen.append((keyspace, table))
    log_file = spark_log_file(spark_log, verbose, master, f"compact-{Path(root).name}")
    spark = build_session(master, app_name="cdc-bridge-compact", spark_log=log_file)
    try:
        writer = MirrorWriter(root, "compact", ValueFormat.JSON_SCHEMAS)
        found = writer.changelog_tables(spark)
        missing = [f"{k}.{t}" for k, t in chosen if (k, t) not in found]
        if missing:
            print(f"error: --table: no mirror changelog under {root} for {', '.join(missing)}", file=sys.stderr)
            return 2
        started = time.monotonic()
        changed = sum(side_by_side(spark, lambda table: _compact_table(spark, writer, table), chosen or found))
        log.info("compaction done", tables=len(chosen or found), rows_changed=changed,
                 seconds=round(time.monotonic() - started, 2))
    finally:
        spark.stop()
    return 0


def _compact_table(spark: Any, writer: MirrorWriter, table: tuple[str, str]) -> int:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return writer.compact(spark, [table], latest=True)
        except Exception as error:
            if "Concurrent" not in type(error).__name__ + str(error)[:500] or attempt == ATTEMPTS:
                raise
            log.warning("another compaction of the table committed first; trying again", keyspace=table[0],
                        table=table[1], attempt=attempt)
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")
