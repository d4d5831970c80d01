"""CQL types and table schemas, shared by the emulator, the log reader and the translator.

Pure code: types are parsed from their CQL text (as `DESCRIBE` and the driver's metadata
print them); user-defined types are resolved through a mapping the caller supplies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

COLLECTIONS = frozenset({"map", "set", "list"})
SCALARS = frozenset(
    {
        "ascii", "bigint", "blob", "boolean", "counter", "date", "decimal", "double", "duration",
        "float", "inet", "int", "smallint", "text", "time", "timestamp", "timeuuid", "tinyint",
        "uuid", "varchar", "varint",
    }
)


class CqlTypeError(ValueError):
    """A CQL type text that cannot be parsed or resolved (`table_schema.column_of` makes it a
    `SchemaError` naming the table and column)."""


@dataclass(frozen=True, slots=True)
class CqlType:
    """One CQL type. `kind` is a scalar name, a collection name, `tuple`, `vector` or `udt`."""

    kind: str
    params: tuple[CqlType, ...] = ()
    frozen: bool = False
    udt_name: str | None = None
    field_names: tuple[str, ...] = ()
    dimension: int | None = None

    @property
    def is_collection(self) -> bool:
        return self.kind in COLLECTIONS

    @property
    def is_udt(self) -> bool:
        return self.kind == "udt"

    @property
    def is_multi_cell(self) -> bool:
        """Non-frozen collections and UDTs: written and logged element by element."""
        return (self.is_collection or self.is_udt) and not self.frozen

    @property
    def fields(self) -> tuple[tuple[str, CqlType], ...]:
        return tuple(zip(self.field_names, self.params, strict=True))

    def as_frozen(self) -> CqlType:
        if self.kind in SCALARS or self.kind == "vector" or self.frozen:
            return self
        return CqlType(self.kind, self.params, True, self.udt_name, self.field_names, self.dimension)

    def cql(self) -> str:
        """CQL text of the type, as it would appear in a `CREATE TABLE`."""
        if self.kind in SCALARS:
            inner = self.kind
        elif self.kind == "udt":
            inner = quote_identifier(self.udt_name or "", only_when_needed=True)
        elif self.kind == "vector":
            inner = f"vector<{self.params[0].cql()}, {self.dimension}>"
        else:
            inner = f"{self.kind}<{', '.join(p.cql() for p in self.params)}>"
        # Tuples are always frozen in CQL; writing `frozen<tuple<..>>` is accepted but redundant.
        return f"frozen<{inner}>" if self.frozen and self.kind != "tuple" else inner

    def __str__(self) -> str:
        return self.cql()


def scalar(kind: str) -> CqlType:
    if kind not in SCALARS:
        raise CqlTypeError(f"unknown CQL type {kind!r}")
    return CqlType("text" if kind == "varchar" else kind)


def quote_identifier(name: str, *, only_when_needed: bool = False) -> str:
    """`name` as a CQL identifier: double-quoted with inner quotes doubled (exact case, valid
    even for reserved words); with `only_when_needed`, a lower-case plain name stays bare, as
    `system_schema` writes type names."""
    if only_when_needed and name.isidentifier() and name.islower():
        return name
    return '"' + name.replace('"', '""') + '"'


UdtResolver = Mapping[str, "CqlType"]


def parse_cql_type(text: str, udts: UdtResolver | None = None) -> CqlType:
    """Parse a CQL type such as `frozen<map<int, list<text>>>` or `vector<float, 3>`."""
    parser = _TypeParser(text, udts or {})
    result = parser.parse()
    parser.expect_end()
    return result


class _TypeParser:
    def __init__(self, text: str, udts: UdtResolver) -> None:
        self.text = text
        self.pos = 0
        self.udts = udts

    def _skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _peek(self) -> str:
        self._skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _take(self, char: str) -> None:
        if self._peek() != char:
            raise CqlTypeError(f"expected {char!r} at position {self.pos} in type {self.text!r}")
        self.pos += 1

    def _word(self) -> str:
        self._skip()
        if self._peek() == '"':
            end = self.text.index('"', self.pos + 1)
            word = self.text[self.pos + 1 : end]
            self.pos = end + 1
            return word
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_."):
            self.pos += 1
        if start == self.pos:
            raise CqlTypeError(f"expected a type name at position {start} in {self.text!r}")
        return self.text[start : self.pos]

    def expect_end(self) -> None:
        if self._peek():
            raise CqlTypeError(f"unexpected {self.text[self.pos:]!r} in type {self.text!r}")

    def _args(self) -> list[CqlType]:
        self._take("<")
        args = [self.parse()]
        while self._peek() == ",":
            self.pos += 1
            args.append(self.parse())
        self._take(">")
        return args

    def parse(self) -> CqlType:
        word = self._word()
        lower = word.lower()
        if lower == "frozen":
            self._take("<")
            inner = self.parse()
            self._take(">")
            return inner.as_frozen()
        if lower in COLLECTIONS:
            args = self._args()
            want = 2 if lower == "map" else 1
            if len(args) != want:
                raise CqlTypeError(f"{lower} takes {want} type argument(s) in {self.text!r}")
            return CqlType(lower, tuple(args))
        if lower == "tuple":
            return CqlType("tuple", tuple(self._args()), frozen=True)
        if lower == "vector":
            self._take("<")
            element = self.parse()
            self._take(",")
            dimension = int(self._word())
            self._take(">")
            return CqlType("vector", (element,), dimension=dimension)
        if lower in SCALARS:
            return scalar(lower)
        name = word.split(".")[-1]
        if name not in self.udts:
            raise CqlTypeError(f"unknown type {word!r} (not a CQL type nor a known user type)")
        return self.udts[name]


def udt(name: str, fields: list[tuple[str, CqlType]]) -> CqlType:
    """A (non-frozen) user-defined type; field order is `DESCRIBE TYPE` order."""
    return CqlType(
        "udt",
        tuple(t for _, t in fields),
        udt_name=name,
        field_names=tuple(n for n, _ in fields),
    )


class ColumnKind(Enum):
    PARTITION_KEY = "partition_key"
    CLUSTERING = "clustering"
    STATIC = "static"
    REGULAR = "regular"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: CqlType
    kind: ColumnKind
    descending: bool = False  # a clustering column declared `CLUSTERING ORDER BY (... DESC)`

    @property
    def is_key(self) -> bool:
        return self.kind in (ColumnKind.PARTITION_KEY, ColumnKind.CLUSTERING)


class ImageMode(Enum):
    OFF = "false"
    CHANGED = "true"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class CdcOptions:
    enabled: bool = False
    preimage: ImageMode = ImageMode.OFF
    postimage: bool = False
    delta_full: bool = True
    ttl: int = 86400


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A base table: columns in declaration order (keys in key order)."""

    keyspace: str
    name: str
    columns: tuple[Column, ...]
    cdc: CdcOptions = field(default_factory=CdcOptions)

    def _of(self, kind: ColumnKind) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.kind is kind)

    @property
    def partition_key(self) -> tuple[Column, ...]:
        return self._of(ColumnKind.PARTITION_KEY)

    @property
    def clustering_key(self) -> tuple[Column, ...]:
        return self._of(ColumnKind.CLUSTERING)

    @property
    def primary_key(self) -> tuple[Column, ...]:
        return self.partition_key + self.clustering_key

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """Static and regular columns, the ones that get `{"value": ...}` cells."""
        return tuple(c for c in self.columns if not c.is_key)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.keyspace}.{self.name} has no column {name!r}")

    @property
    def log_table_name(self) -> str:
        return f"{self.name}_scylla_cdc_log"

    @property
    def qualified_name(self) -> str:
        return f"{self.keyspace}.{self.name}"
