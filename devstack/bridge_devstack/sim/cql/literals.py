"""CQL terms -> canonical Python values (see `bridge_devstack.sim.values`), by the receiving column's type.

Errors name the receiver and the offending constant, as Cassandra's do. Strings for timestamps
without a time zone are read as UTC (Cassandra would use the coordinator's zone).
"""

from __future__ import annotations

import ipaddress
import re
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from cassandra.util import Date, Duration, Time

from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.schema import CqlType
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.lexer import Kind
from bridge_devstack.sim.errors import InvalidRequestError, UnsupportedCqlError
from bridge_devstack.sim.values import FrozenDict, canonical

_INT_RANGES = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64, "counter": 64}
_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 (the driver takes and returns naive UTC datetimes)


class Resolver:
    """Turns terms into values. `params` feed `?` markers; `now_us` is the statement's clock."""

    def __init__(self, params: Sequence[Any] = (), now_us: Callable[[], int] | None = None) -> None:
        self.params = params
        self.now_us = now_us or (lambda: int(datetime.now(UTC).timestamp() * 1_000_000))

    def value(self, term: ast.Term, cql_type: CqlType, receiver: str) -> Any:
        """The canonical value of `term` for a receiver (column, element, field) named `receiver`."""
        if isinstance(term, ast.Marker):
            return self._param(term.index, cql_type, receiver)
        if isinstance(term, ast.Literal):
            return _literal(term, cql_type, receiver)
        if isinstance(term, ast.FunctionCall):
            return self._call(term, cql_type, receiver)
        return self._composite(term, cql_type, receiver)

    def integer(self, term: ast.Term, receiver: str) -> int:
        value = self.value(term, CqlType("bigint"), receiver)
        if value is None:
            raise InvalidRequestError(f"Invalid null value of {receiver}")
        return int(value)

    def _param(self, index: int, cql_type: CqlType, receiver: str) -> Any:
        if index >= len(self.params):
            raise InvalidRequestError(f"no value bound for marker {index} ({receiver})")
        value = self.params[index]
        if cql_type.is_udt and isinstance(value, Mapping):
            unknown = set(value) - set(cql_type.field_names)
            if unknown:
                raise InvalidRequestError(f"Unknown field {sorted(unknown)[0]!r} in value for {receiver}")
            value = tuple(value.get(name) for name in cql_type.field_names)
        if cql_type.kind == "float" and isinstance(value, float):
            value = _float32(value)
        return canonical(value)

    def _call(self, call: ast.FunctionCall, cql_type: CqlType, receiver: str) -> Any:
        name = call.name.lower()
        now = self.now_us()
        if name in ("now", "currenttimeuuid") and not call.args:
            return timeuuid_for(now)
        if name == "uuid" and not call.args:
            return uuid.uuid4()
        if name == "currenttimestamp" and not call.args:
            return _EPOCH + timedelta(milliseconds=now // 1000)
        if name == "currentdate" and not call.args:
            return Date((_EPOCH + timedelta(microseconds=now)).date())
        if name == "totimestamp" and len(call.args) == 1:
            inner = self.value(call.args[0], CqlType("timeuuid"), receiver)
            return _EPOCH + timedelta(milliseconds=(inner.time - 0x01B21DD213814000) // 10_000)
        raise UnsupportedCqlError(f"function {call.name}() (in the value of {receiver}) is not supported")

    def _composite(self, term: ast.Term, cql_type: CqlType, receiver: str) -> Any:
        kind = cql_type.kind
        if isinstance(term, ast.ListTerm) and kind in ("list", "vector", "set"):
            if kind == "set":
                raise _invalid("list literal", term, receiver, cql_type)
            element = cql_type.params[0]
            items = tuple(self.value(i, element, f"element of {receiver}") for i in term.items)
            if kind == "vector" and len(items) != cql_type.dimension:
                raise InvalidRequestError(
                    f"Invalid vector literal for {receiver} of type {cql_type}; expected {cql_type.dimension}"
                    f" elements, but given {len(items)}"
                )
            return items
        if isinstance(term, ast.SetTerm) and kind == "set":
            element = cql_type.params[0]
            return frozenset(self.value(i, element, f"element of {receiver}") for i in term.items)
        if isinstance(term, ast.MapTerm):
            return self._braces(term, cql_type, receiver)
        if isinstance(term, ast.TupleTerm) and kind == "tuple":
            if len(term.items) > len(cql_type.params):
                raise InvalidRequestError(f"Invalid tuple literal for {receiver}: too many elements")
            values = [
                self.value(i, t, f"component of {receiver}") for i, t in zip(term.items, cql_type.params, strict=False)
            ]
            return tuple(values + [None] * (len(cql_type.params) - len(values)))
        if isinstance(term, ast.Name):
            raise InvalidRequestError(f"Undefined name {term.name} in value for {receiver}")
        raise _invalid(type(term).__name__, term, receiver, cql_type)

    def _braces(self, term: ast.MapTerm, cql_type: CqlType, receiver: str) -> Any:
        if cql_type.kind == "set" and not term.entries:
            return frozenset()
        if cql_type.kind == "map":
            key_type, value_type = cql_type.params
            return FrozenDict(
                (self.value(k, key_type, f"key of {receiver}"), self.value(v, value_type, f"value of {receiver}"))
                for k, v in term.entries
            )
        if cql_type.is_udt:
            fields = dict(cql_type.fields)
            values: dict[str, Any] = {}
            for key, value in term.entries:
                if not isinstance(key, ast.Name):
                    raise InvalidRequestError(f"Invalid user type literal for {receiver}: field names expected")
                if key.name not in fields:
                    raise InvalidRequestError(f"Unknown field '{key.name}' in value of user defined type {cql_type}")
                values[key.name] = self.value(value, fields[key.name], f"field {key.name} of {receiver}")
            return tuple(values.get(name) for name in cql_type.field_names)
        raise _invalid("map literal", term, receiver, cql_type)


def _invalid(what: str, term: object, receiver: str, cql_type: CqlType) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid {what} for {receiver} of type {cql_type}")


def _literal(term: ast.Literal, cql_type: CqlType, receiver: str) -> Any:
    if term.kind is Kind.IDENT and term.text == "null":
        return None
    try:
        value = _convert_literal(term, cql_type)
    except (ValueError, InvalidOperation, OverflowError) as exc:
        raise InvalidRequestError(
            f'Invalid {term.kind.name} constant ({term.text}) for "{receiver}" of type {cql_type}: {exc}'
        ) from None
    if value is _NO_MATCH:
        raise InvalidRequestError(
            f'Invalid {term.kind.name} constant ({term.text}) for "{receiver}" of type {cql_type}'
        )
    return value


_NO_MATCH = object()


def _convert_literal(term: ast.Literal, cql_type: CqlType) -> Any:
    kind, text, target = term.kind, term.text, cql_type.kind
    if kind is Kind.INTEGER:
        return _from_integer(int(text), target)
    if kind is Kind.FLOAT or (kind is Kind.IDENT and text.lstrip("-") in ("nan", "infinity")):
        if target in ("float", "double"):
            number = float(text.replace("infinity", "inf"))
            return _float32(number) if target == "float" else number
        if target == "decimal" and kind is Kind.FLOAT:
            return Decimal(text)
    if kind is Kind.STRING:
        return _from_string(text, target)
    if kind is Kind.HEX and target == "blob":
        return bytes.fromhex(text[2:])
    if kind is Kind.UUID and target in ("uuid", "timeuuid"):
        value = uuid.UUID(text)
        if target == "timeuuid" and value.version != 1:
            raise ValueError("not a time-based (version 1) uuid")
        return value
    if kind is Kind.IDENT and text in ("true", "false") and target == "boolean":
        return text == "true"
    if kind is Kind.DURATION and target == "duration":
        return _duration(text)
    return _NO_MATCH


def _from_integer(number: int, target: str) -> Any:
    if target in _INT_RANGES:
        bits = _INT_RANGES[target]
        if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
            raise ValueError(f"out of range for {target}")
        return number
    if target == "varint":
        return number
    if target == "double":
        return float(number)
    if target == "float":
        return _float32(float(number))
    if target == "decimal":
        return Decimal(number)
    if target == "timestamp":
        return _EPOCH + timedelta(milliseconds=number)
    if target == "time":
        return Time(number)
    return _NO_MATCH


def _from_string(text: str, target: str) -> Any:
    if target in ("text", "varchar"):
        return text
    if target == "ascii":
        text.encode("ascii")
        return text
    if target == "timestamp":
        return _parse_timestamp(text)
    if target == "date":
        return Date(datetime.strptime(text, "%Y-%m-%d").date())  # noqa: DTZ007 (a date: no time, no zone)
    if target == "time":
        return Time(text)
    if target == "inet":
        return str(ipaddress.ip_address(text))
    if target in ("uuid", "timeuuid"):
        return uuid.UUID(text)
    return _NO_MATCH


_TZ = re.compile(r"(Z|[+-]\d{2}:?\d{2})$")


def _parse_timestamp(text: str) -> datetime:
    body = text.strip().replace("T", " ")
    zone = _TZ.search(body)
    offset = timedelta(0)
    if zone:
        body = body[: zone.start()].strip()
        if zone.group() != "Z":
            sign = 1 if zone.group()[0] == "+" else -1
            digits = zone.group()[1:].replace(":", "")
            offset = sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    parsed = datetime.fromisoformat(body) - offset
    return parsed.replace(microsecond=parsed.microsecond // 1000 * 1000)


_DURATION_UNITS = {
    "y": (12, 0, 0),
    "mo": (1, 0, 0),
    "w": (0, 7, 0),
    "d": (0, 1, 0),
    "h": (0, 0, 3_600_000_000_000),
    "m": (0, 0, 60_000_000_000),
    "s": (0, 0, 1_000_000_000),
    "ms": (0, 0, 1_000_000),
    "us": (0, 0, 1000),
    "µs": (0, 0, 1000),
    "ns": (0, 0, 1),
}


def _duration(text: str) -> Duration:
    months = days = nanos = 0
    for amount, unit in re.findall(r"(\d+)(y|mo|w|d|h|ms|m|s|us|µs|ns)", text):
        m, d, n = _DURATION_UNITS[unit]
        months, days, nanos = months + m * int(amount), days + d * int(amount), nanos + n * int(amount)
    return Duration(months, days, nanos)


def _float32(number: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", number))[0])
