"""The statement subset as a small syntax tree. Values are still unresolved terms here; they get
their Python value from the column type later (see `literals.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bridge_devstack.sim.cql.lexer import Kind

# ---------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant: string, number, blob, uuid, duration, or a keyword (true/false/null/nan/infinity)."""

    kind: Kind
    text: str
    position: int


@dataclass(frozen=True, slots=True)
class Marker:
    """A `?` bind marker, numbered from 0 in order of appearance."""

    index: int


@dataclass(frozen=True, slots=True)
class Name:
    """A bare identifier used as a term (a UDT literal's field name)."""

    name: str


@dataclass(frozen=True, slots=True)
class ListTerm:
    items: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class SetTerm:
    items: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class MapTerm:
    """`{k: v, ...}`: a map, or a UDT literal when the keys are names; `{}` is also an empty set."""

    entries: tuple[tuple[Term, Term], ...]


@dataclass(frozen=True, slots=True)
class TupleTerm:
    items: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class FunctionCall:
    name: str
    args: tuple[Term, ...]


Term = Literal | Marker | Name | ListTerm | SetTerm | MapTerm | TupleTerm | FunctionCall


# ---------------------------------------------------------------- DML


@dataclass(frozen=True, slots=True)
class TableName:
    keyspace: str | None
    name: str


@dataclass(frozen=True, slots=True)
class Using:
    ttl: Term | None = None
    timestamp: Term | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """One `SET` item. `op` is `=` (overwrite), `+` (append/union), `prepend`, `-` (remove),
    `element` (`c[key] = v`, `key` is the index/map key/SCYLLA_TIMEUUID_LIST_INDEX call) or
    `field` (`c.f = v`)."""

    column: str
    op: str
    value: Term
    key: Term | None = None
    field: str | None = None


@dataclass(frozen=True, slots=True)
class Relation:
    """`columns op value`; a single column or a `(c1, c2)` tuple. For IN, `value` is a TupleTerm
    of the alternatives."""

    columns: tuple[str, ...]
    op: str
    value: Term
    is_tuple: bool = False


@dataclass(frozen=True, slots=True)
class Insert:
    table: TableName
    columns: tuple[str, ...]
    values: tuple[Term, ...]
    using: Using


@dataclass(frozen=True, slots=True)
class Update:
    table: TableName
    using: Using
    assignments: tuple[Assignment, ...]
    where: tuple[Relation, ...]


@dataclass(frozen=True, slots=True)
class DeleteTarget:
    column: str
    key: Term | None = None
    field: str | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    table: TableName
    targets: tuple[DeleteTarget, ...]
    using: Using
    where: tuple[Relation, ...]


Modification = Insert | Update | Delete


@dataclass(frozen=True, slots=True)
class Batch:
    kind: str  # "logged" or "unlogged"
    using: Using
    statements: tuple[Modification, ...]


# ---------------------------------------------------------------- DDL


@dataclass(frozen=True, slots=True)
class Option:
    """`name = value` of a `WITH` clause; `raw` is the value's CQL text, passed on verbatim."""

    name: str
    value: Term
    raw: str


@dataclass(frozen=True, slots=True)
class ColumnDef:
    name: str
    type_text: str
    static: bool = False


@dataclass(frozen=True, slots=True)
class CreateKeyspace:
    name: str
    if_not_exists: bool
    options: tuple[Option, ...]


@dataclass(frozen=True, slots=True)
class CreateType:
    keyspace: str | None
    name: str
    if_not_exists: bool
    fields: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableName
    if_not_exists: bool
    columns: tuple[ColumnDef, ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...]
    clustering_order: tuple[tuple[str, str], ...] = ()
    options: tuple[Option, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterTable:
    """`ALTER TABLE` with exactly one of: added columns, dropped columns, or options."""

    table: TableName
    add: tuple[ColumnDef, ...] = ()
    drop: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()


@dataclass(frozen=True, slots=True)
class Drop:
    what: str  # "keyspace", "table" or "type"
    keyspace: str | None
    name: str
    if_exists: bool


@dataclass(frozen=True, slots=True)
class Truncate:
    table: TableName


@dataclass(frozen=True, slots=True)
class Use:
    keyspace: str


@dataclass(frozen=True, slots=True)
class PassThrough:
    """A statement the emulator hands to Cassandra unchanged (e.g. `ALTER TYPE`, `SELECT`)."""

    text: str
    keyspace: str | None = None
    type_name: str | None = None


Statement = (
    Modification | Batch | CreateKeyspace | CreateType | CreateTable | AlterTable | Drop | Truncate | Use | PassThrough
)


@dataclass(slots=True)
class MarkerCounter:
    """Numbers bind markers while parsing."""

    count: int = field(default=0)

    def next(self) -> int:
        self.count += 1
        return self.count - 1
