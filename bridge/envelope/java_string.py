"""`String.valueOf` of the Java connector's converted key values, for the `kafka-headers` placement.

The connector (`ScyllaChangeRecordEmitter.buildPkHeaders`, 74d336e) adds one string header per
non-null key column, `String.valueOf(<value as translateFieldToKafka returns it>)`; Connect's
default `SimpleHeaderConverter` writes a string header as its UTF-8 bytes. Our converted values
(`bridge.envelope.types`) differ from the connector's Java objects for a few types, so the text
is derived from the value and its Connect schema:

- string (text, ascii, uuid, timeuuid, inet, decimal, varint, duration): the string itself;
- int8/16/32/64 and `time` (ns, a Long): the decimal number;
- float / double: `Float.toString` / `Double.toString` (`bridge.envelope.java_text`);
- boolean: `true` / `false`;
- `Date` (days) and `Timestamp` (ms), both a `java.util.Date` in the connector:
  `Date.toString`, `Mon Jun 10 12:34:56 UTC 2024` (seconds, no milliseconds);
- array (a List): `[a, b]`; struct (tuple, UDT, map entry; a Connect Struct): `Struct{a=1,b=x}`
  with null fields left out;
- bytes: **not matched**. The connector holds a ByteBuffer, whose `toString`
  (`java.nio.HeapByteBuffer[pos=.. lim=.. cap=..]`) shows positions in the driver's frame, not
  the value; we write standard base64, as JSON writes bytes.

`Date.toString` uses the JVM's default time zone; we assume UTC (the connector's container
images run in UTC).
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from bridge.envelope import connect_schema as cs
from bridge.envelope.java_text import double_text, float_text

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def date_text(millis: int) -> str:
    """`java.util.Date.toString()` of an instant (ms since the epoch) in UTC."""
    moment = _EPOCH + datetime.timedelta(milliseconds=millis)
    return (f"{_DAYS[moment.weekday()]} {_MONTHS[moment.month - 1]} {moment.day:02d} "
            f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} UTC {moment.year:04d}")


def java_string(value: Any, schema: cs.ConnectSchema) -> str:
    """`String.valueOf` of the Java object the connector holds for `value` (module docstring)."""
    if value is None:
        return "null"
    kind = schema.type
    if kind == cs.STRING:
        return str(value)
    if kind == cs.BOOLEAN:
        return "true" if value else "false"
    if schema.name == cs.DATE_NAME:
        return date_text(int(value) * 86_400_000)
    if schema.name == cs.TIMESTAMP_NAME:
        return date_text(int(value))
    if kind in (cs.INT8, cs.INT16, cs.INT32, cs.INT64):
        return str(int(value))
    if kind == cs.FLOAT32:
        return float_text(float(value))
    if kind == cs.FLOAT64:
        return double_text(float(value))
    if kind == cs.BYTES:
        return base64.b64encode(bytes(value)).decode()
    if kind == cs.ARRAY:
        assert schema.items is not None
        items = schema.items
        return "[" + ", ".join(java_string(item, items) for item in value) + "]"
    members = ",".join(f"{field.name}={java_string(value[field.name], field.schema)}"
                       for field in schema.fields if value.get(field.name) is not None)
    return "Struct{" + members + "}"
