"""CQL type -> Kafka Connect schema + value converter (reference/connector.md section 2.5).

Each `TypeMapping` pairs the (optional) Connect schema of a CQL type with a function that turns a
non-null value, as the cassandra-driver returns it, into the Connect value the serializers write:

| CQL                         | Connect                        | value                          |
|-----------------------------|--------------------------------|--------------------------------|
| ascii, text, varchar        | string                         | str                            |
| tinyint/smallint/int/bigint | int8/int16/int32/int64         | int (range checked)            |
| counter                     | int64                          | int                            |
| float / double              | float / double                 | `Float32` / float or `Float64` |
| boolean                     | boolean                        | bool                           |
| blob                        | bytes                          | bytes                          |
| decimal, varint             | string                         | BigDecimal/BigInteger text     |
| uuid, timeuuid              | string                         | canonical lowercase text       |
| inet                        | string                         | `InetAddress.getHostAddress`   |
| duration                    | string                         | `1d12h30m` form                |
| date                        | int32 `...connect.data.Date`   | days since the epoch           |
| timestamp                   | int64 `...connect.data.Timestamp` | ms since the epoch          |
| time                        | int64                          | ns since midnight              |
| list, set, vector           | array                          | list                           |
| map<K,V>                    | array of struct `<p>MapEntry_K_V` {key, value} | list of dicts  |
| tuple                       | struct `<p>Tuple_A_B` {field_0, ...}           | dict           |
| UDT                         | struct `<p>UDT_<name>`; all fields null -> null | dict          |

`<p>` is the table's schema-name prefix `<topic.prefix>.<ks>.<table>.`, each name adjusted as a
whole by `schema.name.adjustment.mode` (`bridge.envelope.names`). A value of the wrong
Python type or out of range raises `ValueConversionError`; nothing is coerced silently.

Floats carry their Java width for the JSON writer: float32 values are always `Float32`
(`Float.toString` has fewer digits than Python's repr); float64 values are plain floats where
Java's `Double.toString`, Python's repr and orjson write the same text (1e-3 <= |x| < 1e7) and
`Float64` elsewhere (`1.0E10`, `1.5E-5`, `NaN`, ...).
"""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from bridge.envelope import connect_schema as cs
from bridge.envelope.errors import ValueConversionError
from bridge.envelope.java_text import duration_text, inet_text, to_float32
from bridge.envelope.names import SchemaNames
from bridge.scylla.cdc_time import timeuuid_sort_key
from bridge.scylla.schema import CqlType

Converter = Callable[[Any], Any]

_EPOCH = datetime.datetime(1970, 1, 1)  # noqa: DTZ001 (the driver's timestamps are naive UTC datetimes)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_ONE_MS = datetime.timedelta(milliseconds=1)
_dumps = orjson.dumps


class Float32(float):
    """A float value of a Connect float32 field: JSON renders it as Java's `Float.toString`."""

    __slots__ = ()


class Float64(float):
    """A float value of a Connect float64 field: JSON renders it as Java's `Double.toString`."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class TypeMapping:
    """The optional Connect schema of a CQL type and the converter of its non-null values."""

    schema: cs.ConnectSchema
    convert: Converter


def _fail(value: Any, expected: str) -> ValueConversionError:
    return ValueConversionError(f"expected {expected}, got {type(value).__name__} {value!r:.80}")


# Conditions (Python expressions on `value`) under which a converter returns its value as it is.
# The generated row builders (`row_code`) test them in line and call the converter only
# otherwise: a call per column and record is a good part of the translation time.
_UNCHANGED_WHEN: dict[Converter, str] = {}


def unchanged_when(convert: Converter) -> str | None:
    """An expression on `value` true only when `convert(value)` is `value` itself, if known."""
    return _UNCHANGED_WHEN.get(convert)


def _text(value: Any) -> str:
    if type(value) is not str:
        raise _fail(value, "str")
    return value


def _int_in(bits: int, label: str) -> Converter:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def convert(value: Any) -> int:
        if type(value) is not int or not low <= value <= high:
            raise _fail(value, f"int fitting {label}")
        return value

    _UNCHANGED_WHEN[convert] = f"value.__class__ is int and {low} <= value <= {high}"
    return convert


def _varint(value: Any) -> str:
    if type(value) is not int:
        raise _fail(value, "int")
    return str(value)


def _float32(value: Any) -> Float32:
    if not isinstance(value, float | int) or isinstance(value, bool):
        raise _fail(value, "float")
    return Float32(to_float32(value))


def _float64(value: Any) -> float:
    if value.__class__ is not float:
        if not isinstance(value, float | int) or isinstance(value, bool):
            raise _fail(value, "float")
        value = float(value)
    if 1e-3 <= abs(value) < 1e7:
        # Here Java's Double.toString, Python's repr and orjson all write the same shortest
        # plain decimal, so the value can stay a plain float for orjson's fast path.
        return value  # type: ignore[no-any-return]
    return Float64(value)


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise _fail(value, "bool")
    return value


def _blob(value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise _fail(value, "bytes")


def _decimal(value: Any) -> str:
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        raise _fail(value, "finite Decimal")
    # Decimal's to-scientific-string and Java's BigDecimal.toString are the same algorithm;
    # BigDecimal has no negative zero.
    return str(value.copy_abs()) if value.is_zero() else str(value)


def _uuid(value: Any) -> str:
    if value.__class__ is uuid.UUID:
        # orjson writes a UUID in C, in the same canonical lower-case form as `str` (and Java's
        # UUID.toString), about twice as fast as UUID.__str__; two per typical record.
        return _dumps(value)[1:-1].decode()
    if not isinstance(value, uuid.UUID):
        raise _fail(value, "UUID")
    return str(value)


def _inet(value: Any) -> str:
    if isinstance(value, str):
        try:
            return inet_text(value)
        except ValueError:
            pass
    elif isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return inet_text(str(value))
    raise _fail(value, "IP address")


def _duration(value: Any) -> str:
    try:
        months, days, nanos = int(value.months), int(value.days), int(value.nanoseconds)
    except AttributeError:
        raise _fail(value, "cassandra.util.Duration") from None
    return duration_text(months, days, nanos)


def _date(value: Any) -> int:
    days = getattr(value, "days_from_epoch", None)  # cassandra.util.Date
    if type(days) is int:
        return days
    if type(value) is datetime.date:
        return (value - _EPOCH_DATE).days
    raise _fail(value, "cassandra.util.Date or date")


def _time(value: Any) -> int:
    nanos = getattr(value, "nanosecond_time", None)  # cassandra.util.Time
    if type(nanos) is int:
        return nanos
    if isinstance(value, datetime.time):
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        return seconds * 1_000_000_000 + value.microsecond * 1000
    raise _fail(value, "cassandra.util.Time or time")


def _timestamp(value: Any) -> int:
    if value.__class__ is not datetime.datetime and not isinstance(value, datetime.datetime):
        raise _fail(value, "datetime")
    if value.tzinfo is not None:
        value = value.astimezone(datetime.UTC).replace(tzinfo=None)
    since: datetime.timedelta = value - _EPOCH  # the driver's naive datetimes are UTC
    return since // _ONE_MS  # floors, as the ms count must (one C operation)


_UNCHANGED_WHEN[_text] = "value.__class__ is str"
_UNCHANGED_WHEN[_boolean] = "value.__class__ is bool"
_UNCHANGED_WHEN[_float64] = "value.__class__ is float and (1e-3 <= value < 1e7 or -1e7 < value <= -1e-3)"

_SCALARS: dict[str, tuple[Callable[[], cs.ConnectSchema], Converter]] = {
    "ascii": (lambda: cs.primitive(cs.STRING), _text),
    "text": (lambda: cs.primitive(cs.STRING), _text),
    "tinyint": (lambda: cs.primitive(cs.INT8), _int_in(8, "tinyint")),
    "smallint": (lambda: cs.primitive(cs.INT16), _int_in(16, "smallint")),
    "int": (lambda: cs.primitive(cs.INT32), _int_in(32, "int")),
    "bigint": (lambda: cs.primitive(cs.INT64), _int_in(64, "bigint")),
    "counter": (lambda: cs.primitive(cs.INT64), _int_in(64, "counter")),
    "varint": (lambda: cs.primitive(cs.STRING), _varint),
    "float": (lambda: cs.primitive(cs.FLOAT32), _float32),
    "double": (lambda: cs.primitive(cs.FLOAT64), _float64),
    "boolean": (lambda: cs.primitive(cs.BOOLEAN), _boolean),
    "blob": (lambda: cs.primitive(cs.BYTES), _blob),
    "decimal": (lambda: cs.primitive(cs.STRING), _decimal),
    "uuid": (lambda: cs.primitive(cs.STRING), _uuid),
    "timeuuid": (lambda: cs.primitive(cs.STRING), _uuid),
    "inet": (lambda: cs.primitive(cs.STRING), _inet),
    "duration": (lambda: cs.primitive(cs.STRING), _duration),
    "date": (cs.date, _date),
    "time": (lambda: cs.primitive(cs.INT64), _time),
    "timestamp": (cs.timestamp, _timestamp),
}


def type_label(cql: CqlType) -> str:
    """The connector's name of a type inside struct names: `INT`, `List_INT`, `Map_INT_VARCHAR`,
    `Tuple_INT_VARCHAR`, `UDT_<name>`: scylla-cdc-java's CqlType names, in which `text` is
    `VARCHAR` (the driver's name for it; seen in the connector's records)."""
    if cql.kind in ("list", "set"):
        return f"{cql.kind.capitalize()}_{type_label(cql.params[0])}"
    if cql.kind == "map":
        return f"Map_{type_label(cql.params[0])}_{type_label(cql.params[1])}"
    if cql.kind == "tuple":
        return "_".join(["Tuple", *(type_label(p) for p in cql.params)])
    if cql.kind == "udt":
        return "UDT_" + (cql.udt_name or "").replace(".", "_").replace("-", "_")
    if cql.kind == "vector":
        return f"Vector_{type_label(cql.params[0])}"
    return "VARCHAR" if cql.kind == "text" else cql.kind.upper()


def _iterable(value: Any, what: str) -> Iterable[Any]:
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise _fail(value, what)
    return value  # type: ignore[no-any-return]


def _array_of(element: TypeMapping, what: str) -> Converter:
    convert = element.convert

    def to_array(value: Any) -> list[Any]:
        return [None if item is None else convert(item) for item in _iterable(value, what)]

    return to_array


def _map_entries(key: TypeMapping, item: TypeMapping) -> Converter:
    key_convert, item_convert = key.convert, item.convert

    def to_entries(value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, Mapping):
            raise _fail(value, "map")
        return [
            {"key": None if k is None else key_convert(k), "value": None if v is None else item_convert(v)}
            for k, v in value.items()
        ]

    return to_entries


def list_key_order(key: Any) -> tuple[int, int]:
    """The order of a non-frozen list's cell key, a timeuuid (version 1) in the log; anything
    else is refused rather than put somewhere in the list."""
    if type(key) is not uuid.UUID or key.version != 1:
        raise ValueConversionError(f"list key {key!r:.60} is not a timeuuid")
    return timeuuid_sort_key(key)


def list_values_of_keyed(element: TypeMapping) -> Converter:
    """A non-frozen list as the log shows it (`map<timeuuid, V>`): values in timeuuid key order."""
    convert = element.convert

    def to_array(value: Any) -> list[Any]:
        if not isinstance(value, Mapping):
            raise _fail(value, "map<timeuuid, V> of a non-frozen list")
        ordered = sorted(value.items(), key=lambda kv: list_key_order(kv[0]))
        return [None if v is None else convert(v) for _, v in ordered]

    return to_array


def _positional(value: Any, count: int, what: str) -> list[Any]:
    if isinstance(value, tuple | list):
        items = list(value)
    else:
        raise _fail(value, what)
    if len(items) > count:
        raise ValueConversionError(f"{what} has {len(items)} components, the type has {count}")
    return items + [None] * (count - len(items))


def _tuple_struct(members: list[TypeMapping], names: list[str]) -> Converter:
    converters = [m.convert for m in members]

    def to_struct(value: Any) -> dict[str, Any]:
        items = _positional(value, len(names), "tuple")
        return {n: None if v is None else c(v) for n, c, v in zip(names, converters, items, strict=True)}

    return to_struct


def udt_fields(value: Any, names: tuple[str, ...]) -> list[Any]:
    """Field values of a driver UDT value, in declaration order: namedtuples (the driver's
    default) by position, mappings by name, registered classes by attribute."""
    if isinstance(value, tuple):
        return _positional(value, len(names), "UDT value")
    if isinstance(value, Mapping):
        return [value.get(n) for n in names]
    if all(hasattr(value, n) for n in names):
        return [getattr(value, n) for n in names]
    raise _fail(value, f"UDT value with fields {names}")


def _udt_struct(members: list[TypeMapping], names: tuple[str, ...]) -> Converter:
    converters = [m.convert for m in members]

    def to_struct(value: Any) -> dict[str, Any] | None:
        items = udt_fields(value, names)
        if all(v is None for v in items):
            return None  # the connector's rule: a UDT whose fields are all null is null
        return {n: None if v is None else c(v) for n, c, v in zip(names, converters, items, strict=True)}

    return to_struct


def map_type(cql: CqlType, names: SchemaNames) -> TypeMapping:
    """The Connect schema (always optional) and converter of a frozen/atomic CQL value."""
    if cql.kind in _SCALARS:
        make_schema, convert = _SCALARS[cql.kind]
        return TypeMapping(make_schema(), convert)
    if cql.kind in ("list", "set", "vector"):
        element = map_type(cql.params[0], names)
        return TypeMapping(cs.array(element.schema), _array_of(element, cql.kind))
    if cql.kind == "map":
        key, item = (map_type(p, names) for p in cql.params)
        entry_name = names.of(f"MapEntry_{type_label(cql.params[0])}_{type_label(cql.params[1])}")
        entry_fields = [cs.ConnectField("key", key.schema), cs.ConnectField("value", item.schema)]
        entry = cs.struct(entry_name, entry_fields, False)
        return TypeMapping(cs.array(entry), _map_entries(key, item))
    if cql.kind == "tuple":
        members = [map_type(p, names) for p in cql.params]
        field_names = [f"field_{i}" for i in range(len(members))]
        fields = [cs.ConnectField(n, m.schema) for n, m in zip(field_names, members, strict=True)]
        return TypeMapping(cs.struct(names.of(type_label(cql)), fields, True), _tuple_struct(members, field_names))
    if cql.kind == "udt":
        members = [map_type(p, names) for p in cql.params]
        fields = [cs.ConnectField(n, m.schema) for n, m in zip(cql.field_names, members, strict=True)]
        schema = cs.struct(names.of(type_label(cql)), fields, True)
        return TypeMapping(schema, _udt_struct(members, cql.field_names))
    raise ValueConversionError(f"unsupported CQL type {cql.cql()}")
