"""The two ceilings a worker's catch-up is measured against, on the same servers in the same run:

- `paging_ceiling`: the raw rate of paging the same CDC log rows through the Python driver, no
  processing (every stream of each log table the catch-up read, the reader's page size and
  concurrency, rows as tuples and dropped);
- `producing_ceiling`: the raw rate of producing records of the same sizes to the same Kafka with
  the worker's own transactional producer (same settings, a commit every `commit_every` records).

Each returns rows (records) per second of wall time; a bridge cannot beat the slower of the two.
Rows are paged through a session made as the worker makes its own (`bridge_session`: the same
protocol version and result decoders), so the ceiling is the driver as the bridge uses it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from cassandra.cluster import ExecutionProfile
from cassandra.query import SimpleStatement, tuple_factory

from bridge.kafka.transactions import TransactionalProducer
from bridge.scylla.session import connect
from bridge.scylla.settings import ReaderSettings

TUPLES = "bench-tuples"  # the execution profile of `bridge_session` whose rows are plain tuples, as the reader's


@contextmanager
def bridge_session(host: str, port: int) -> Iterator[Any]:
    """A session connected as `cdc-bridge run` connects (bridge.scylla.session.connect), with the
    execution profile `TUPLES`."""
    cluster, session = connect([(host, port)])
    cluster.add_execution_profile(TUPLES, ExecutionProfile(row_factory=tuple_factory))
    try:
        yield session
    finally:
        cluster.shutdown()


def paging_ceiling(session: Any, tables: Sequence[str]) -> dict[str, Any]:
    """`tables`: the base tables (`keyspace.table`) whose log tables the catch-up read, all paged
    in one pool as the worker's reader pages them."""
    settings = ReaderSettings()
    scans: list[tuple[str, bytes]] = []
    for name in tables:
        keyspace, table = name.split(".", 1)
        log_table = f'"{keyspace}"."{table}_scylla_cdc_log"'
        scans += [(log_table, row[0]) for row in session.execute(f'SELECT DISTINCT "cdc$stream_id" FROM {log_table}',
                                                                 execution_profile=TUPLES)]

    def scan(target: tuple[str, bytes]) -> int:
        log_table, stream = target
        statement = SimpleStatement(f'SELECT * FROM {log_table} WHERE "cdc$stream_id" = %s',
                                    fetch_size=settings.page_size)
        return sum(1 for _ in session.execute(statement, (stream,), execution_profile=TUPLES))

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=min(32, settings.max_inflight_queries)) as pool:
        rows = sum(pool.map(scan, scans))
    elapsed = time.monotonic() - started
    return {"rows": rows, "tables": list(tables), "streams": len(scans), "elapsed_s": round(elapsed, 2),
            "rows_per_s": round(rows / elapsed)}


def producing_ceiling(bootstrap: str, samples: list[tuple[bytes | None, bytes | None]], records: int,
                      commit_every: int = 5000) -> dict[str, Any]:
    """`samples`: records the bridge produced, cycled (same sizes, same compressibility)."""
    topic = f"bench-ceiling-{uuid.uuid4().hex[:8]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = TransactionalProducer({"bootstrap.servers": bootstrap}, f"bench-ceiling-{uuid.uuid4().hex[:8]}")
    started = time.monotonic()
    for i in range(records):
        key, value = samples[i % len(samples)]
        producer.produce(topic, key, value)
        if producer.records_in_transaction >= commit_every:
            producer.commit([], None)
        elif i % 1000 == 0:
            producer.serve()
    producer.commit([], None)
    elapsed = time.monotonic() - started
    producer.close()
    mean_value = sum(len(v or b"") for _, v in samples) / len(samples)
    return {"records": records, "mean_value_bytes": round(mean_value), "elapsed_s": round(elapsed, 2),
            "records_per_s": round(records / elapsed)}
