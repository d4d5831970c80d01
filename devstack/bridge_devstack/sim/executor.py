"""Runs rendered writes and reads on Cassandra: prepared statements (cached by text), and
single-partition unlogged batches, which Cassandra applies atomically and in isolation (so
positional list operations all see the list as it was before the write, and readers never see
part of a record, as with ScyllaDB's one mutation per partition)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cassandra.query import BatchStatement, BatchType

from bridge_devstack.sim.writes import Write


class Executor:
    def __init__(self, session: Any) -> None:
        self.session = session
        self._prepared: dict[str, Any] = {}

    def prepared(self, cql: str) -> Any:
        statement = self._prepared.get(cql)
        if statement is None:
            statement = self._prepared[cql] = self.session.prepare(cql)
        return statement

    def batch(self, writes: Sequence[Write]) -> Any:
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for write in writes:
            batch.add(self.prepared(write.cql), write.values)
        return batch

    def run(self, batches: Iterable[Sequence[Write]]) -> None:
        """Send every batch at once and wait; the first failure is raised after all finished."""
        futures = [self.session.execute_async(self.batch(b)) for b in batches if b]
        errors: list[BaseException] = []
        for future in futures:
            try:
                future.result()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def query(self, cql: str, values: Sequence[Any]) -> list[Any]:
        return list(self.session.execute(self.prepared(cql), values))
