"""The translator the worker uses: plans cached per table schema, processing time from a clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from bridge.envelope.advanced_plan import AdvancedPlan, build_advanced_plan
from bridge.envelope.advanced_translate import translate_advanced
from bridge.envelope.plan import TablePlan, build_plan
from bridge.envelope.records import Translation
from bridge.envelope.settings import EnvelopeSettings
from bridge.envelope.snapshot import translate_snapshot, translate_snapshot_advanced
from bridge.envelope.translate import translate
from bridge.scylla.model import ChangeRecord, SnapshotRow
from bridge.scylla.schema import TableSchema

Plan = TablePlan | AdvancedPlan  # legacy or advanced (`cdc.output.format`)


def _wall_clock_micros() -> int:
    return time.time_ns() // 1000


class Translator:
    """Builds each table schema's plan once (a schema change gives a new TableSchema, hence a new
    plan) and translates records with it. `on_new_plan` runs once per plan built, before its
    first record is translated (`RecordSerializer.prepare` registers the plan's Avro schemas
    there); when it raises, the plan is not kept and the next call tries again."""

    def __init__(
        self,
        settings: EnvelopeSettings,
        clock_micros: Callable[[], int] = _wall_clock_micros,
        on_new_plan: Callable[[Plan], None] | None = None,
    ) -> None:
        self.settings = settings
        self._clock = clock_micros
        self._on_new_plan = on_new_plan
        # Keyed by identity first (no hashing of the whole schema per record), then by value so
        # that equal schemas loaded twice share one plan.
        self._by_identity: dict[int, tuple[TableSchema, Plan]] = {}
        self._by_schema: dict[TableSchema, Plan] = {}
        self._build: Callable[[TableSchema, EnvelopeSettings], Plan] = (
            build_advanced_plan if settings.advanced else build_plan)

    def plan(self, table: TableSchema) -> Plan:
        cached = self._by_identity.get(id(table))
        if cached is not None and cached[0] is table:
            return cached[1]
        plan = self._by_schema.get(table)
        if plan is None:
            plan = self._build(table, self.settings)
            if self._on_new_plan is not None:
                self._on_new_plan(plan)
            self._by_schema[table] = plan
        self._by_identity[id(table)] = (table, plan)
        return plan

    def translate(self, record: ChangeRecord, table: TableSchema) -> Translation:
        plan = self.plan(table)
        if isinstance(plan, TablePlan):
            return translate(plan, record, self._clock())
        return translate_advanced(plan, record, self._clock())

    def translate_snapshot(self, rows: Sequence[SnapshotRow], kind: str, table: TableSchema) -> Translation:
        plan = self.plan(table)
        if isinstance(plan, TablePlan):
            return translate_snapshot(plan, rows, kind, self._clock())
        return translate_snapshot_advanced(plan, rows, kind, self._clock())
