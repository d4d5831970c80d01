"""Schema and field names valid for Java Avro: Debezium's `schema.name.adjustment.mode` and
`field.name.adjustment.mode` (`none`, `avro`, `avro_unicode`).

CQL allows any text as a quoted column, UDT or field name (`"it's"`, `"my-col"`, `"naïve"`);
Java Avro (a registry parses every schema it stores with it) accepts only names made of letters,
digits and `_` that do not start with a digit. The adjusters below are Debezium's
`SchemaNameAdjuster` (`AVRO`, `AVRO_UNICODE`, `AVRO_FIELD_NAMER`, `AVRO_UNICODE_FIELD_NAMER`),
reproduced character for character because a consumer that moves from the Java connector sees
the same names:

- `avro`: every invalid character becomes `_`; a leading digit `d` becomes `_d` (Debezium keeps
  the digit so that `1a` and `2a` stay apart).
- `avro_unicode`: every invalid character becomes `_uXXXX` (Java's `Integer.toHexString`, padded
  to four digits only when it has at most two: `Ω` is `_u3a9`), and `_` itself is escaped
  (`_u005f`) so that the mapping cannot collide.
- schema names keep `.` (a full name is `namespace.name`); field names do not.

Java works on UTF-16 units, so a character beyond U+FFFF (an emoji) is two invalid units: `__`
or `_ud83d_ude00`. Where Debezium's output would still be invalid Avro (a namespace part that
starts with a digit, as in `shop.ks.t.1st.Cell`, or is empty), `avro_full_name` repairs that part
when the schema is converted to Avro; the Connect name (and so the JSON output) stays Debezium's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class NameAdjustment(Enum):
    NONE = "none"
    AVRO = "avro"
    AVRO_UNICODE = "avro_unicode"


def name_adjustment(text: str) -> NameAdjustment:
    """`none`, `avro` or `avro_unicode` (any case, as Debezium parses it); ValueError names them."""
    try:
        return NameAdjustment(text.strip().lower())
    except ValueError:
        choices = ", ".join(m.value for m in NameAdjustment)
        raise ValueError(f"unknown adjustment mode {text!r}; use one of {choices}") from None


def _latin(unit: int) -> bool:
    return 0x61 <= unit <= 0x7A or 0x41 <= unit <= 0x5A  # a-z, A-Z


def _digit(unit: int) -> bool:
    return 0x30 <= unit <= 0x39


_DOT = 0x2E
_UNDERSCORE = 0x5F


def _unicode_escape(unit: int) -> str:
    hex_digits = format(unit, "x")
    return "_u" + ("00" + hex_digits if len(hex_digits) <= 2 else hex_digits)


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _adjust(text: str, unicode: bool, dots: bool) -> str:
    """Debezium's `SchemaNameAdjuster.validFullname` with the replacement function chosen by
    `unicode` (underscore or `_uXXXX`) and `dots` (schema names keep `.`, field names do not)."""
    out: list[str] = []
    for position, unit in enumerate(_utf16_units(text)):
        valid = _latin(unit) or (unit == _UNDERSCORE and not unicode)
        if position > 0:
            valid = valid or _digit(unit) or (dots and unit == _DOT)
        if valid:
            out.append(chr(unit))
        elif unicode:
            out.append(_unicode_escape(unit))
        else:
            out.append("_")
            if position == 0 and _digit(unit):
                out.append(chr(unit))  # Debezium: `1a` -> `_1a`, so that `1a` and `2a` stay apart
    return "".join(out)


def adjust_schema_name(name: str, mode: NameAdjustment) -> str:
    """A Connect schema name under `schema.name.adjustment.mode` (Debezium's adjuster)."""
    if mode is NameAdjustment.NONE:
        return name
    return _adjust(name, mode is NameAdjustment.AVRO_UNICODE, dots=True)


def adjust_field_name(name: str, mode: NameAdjustment) -> str:
    """A field name under `field.name.adjustment.mode` (Debezium's field namer)."""
    if mode is NameAdjustment.NONE:
        return name
    return _adjust(name, mode is NameAdjustment.AVRO_UNICODE, dots=False)


def avro_full_name(name: str, mode: NameAdjustment) -> str:
    """A Connect schema name as an Avro full name: each dot-separated part a valid Avro name.
    Debezium's adjuster lets a digit follow a dot and leaves empty parts, which Java Avro refuses
    as namespaces; such a part's first digit is replaced as a leading one is (`_1` or `_u0031`),
    an empty part becomes `_`. Other parts, and every name under `none`, stay as they are."""
    if mode is NameAdjustment.NONE:
        return name
    parts = name.split(".")
    if all(part and not _digit(ord(part[0])) for part in parts):
        return name
    unicode = mode is NameAdjustment.AVRO_UNICODE
    return ".".join(_repair_part(part, unicode) for part in parts)


def _repair_part(part: str, unicode: bool) -> str:
    if not part:
        return "_"
    if not _digit(ord(part[0])):
        return part
    return (_unicode_escape(ord(part[0])) if unicode else "_" + part[0]) + part[1:]


@dataclass(frozen=True, slots=True)
class SchemaNames:
    """The struct names of one table: `<base>.<suffix>`, `base` being `<topic.prefix>.<ks>.<table>`
    as written, the whole name adjusted once (the unicode adjuster is not idempotent: it escapes
    the `_` of its own escapes)."""

    base: str
    mode: NameAdjustment = NameAdjustment.AVRO

    def of(self, suffix: str) -> str:
        if not self.base:
            # The advanced format names nested structs of key columns without a prefix, and
            # without adjustment (`ScyllaSchema.computeColumnSchema(type)` with prefix "").
            return suffix
        return adjust_schema_name(f"{self.base}.{suffix}", self.mode)
