"""What an envelope topic's rows look like: Connect schemas as Spark types, and per column its role.

An envelope's `after`/`before` struct (docs/envelope.md 1-2) holds three kinds of fields:
key columns as plain values, every other column as a cell struct (`P.X.Cell {value}`), and the
companion `X__elements {added, removed}` of a non-frozen collection or UDT. `TableShape` names
them once per schema so the flattening and the mirror never guess per row.

Sources of a shape: the Connect schema of a JSON message with `schemas.enable=true`, the Avro
writer schema from the registry (converted to the same Connect form by `avro_to_connect`), or,
for schemaless JSON, the Spark type Spark inferred from the micro-batch (`shape_from_spark`),
where cells are recognised by their form (a struct with the single field `value`) and logical
types (Date, Timestamp) cannot be known.

Values stay in the Connect representation inside the job (dates as days, timestamps as epoch
milliseconds, maps as arrays of `{key, value}` entries) because that is what the JSON and the
flattened output carry; only the mirror's Delta columns use Spark's date, timestamp and map types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pyspark.sql import types as T

from bridge.spark.core.errors import SparkJobError

DATE = "org.apache.kafka.connect.data.Date"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
ELEMENTS_SUFFIX = "__elements"

_PRIMITIVES: dict[str, T.DataType] = {
    "boolean": T.BooleanType(), "int8": T.ByteType(), "int16": T.ShortType(), "int32": T.IntegerType(),
    "int64": T.LongType(), "float": T.FloatType(), "float32": T.FloatType(), "double": T.DoubleType(),
    "float64": T.DoubleType(), "bytes": T.BinaryType(), "string": T.StringType(),
}

Collection = Literal["map", "set", "list", "udt"]
Logical = Literal["date", "timestamp"]


def connect_to_spark(schema: dict[str, Any]) -> T.DataType:
    """The Spark type `from_json` needs to read a payload written with this Connect schema."""
    kind = schema.get("type")
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "struct":
        return T.StructType([T.StructField(f["field"], connect_to_spark(f), True) for f in schema.get("fields", [])])
    if kind == "array":
        return T.ArrayType(connect_to_spark(schema["items"]), True)
    if kind == "map":
        keys = schema["keys"]
        if keys.get("type") == "string":
            return T.MapType(T.StringType(), connect_to_spark(schema["values"]), True)
        return T.StringType()  # JsonConverter writes such maps as [[k, v], ...]: kept as raw JSON text
    raise SparkJobError(f"unsupported Connect schema type {kind!r} in {schema.get('name') or schema}")


def _is_entry_struct(data_type: T.DataType) -> bool:
    return isinstance(data_type, T.StructType) and [f.name for f in data_type.fields] == ["key", "value"]


@dataclass(frozen=True, slots=True)
class ColumnShape:
    name: str
    is_key: bool
    spark_type: T.DataType  # the value's type in the envelope (inside the cell for non-key columns)
    logical: Logical | None = None
    collection: Collection | None = None  # set for maps (frozen too) and for columns with element changes
    has_elements: bool = False

    @property
    def is_map(self) -> bool:
        return self.collection == "map"

    def mirror_type(self) -> T.DataType:
        """The column's type in the mirror's Delta table."""
        if self.logical == "date":
            return T.DateType()
        if self.logical == "timestamp":
            return T.TimestampType()
        if self.is_map and isinstance(self.spark_type, T.ArrayType) and _is_entry_struct(self.spark_type.elementType):
            entry = self.spark_type.elementType
            assert isinstance(entry, T.StructType)
            return T.MapType(entry["key"].dataType, entry["value"].dataType, True)
        return self.spark_type


@dataclass(frozen=True, slots=True)
class TableShape:
    """The columns of one table, in the envelope's field order."""

    columns: tuple[ColumnShape, ...]
    row_type: T.StructType  # the Spark type of `after` / `before`

    @property
    def key_columns(self) -> tuple[ColumnShape, ...]:
        return tuple(c for c in self.columns if c.is_key)

    @property
    def value_columns(self) -> tuple[ColumnShape, ...]:
        return tuple(c for c in self.columns if not c.is_key)

    def column(self, name: str) -> ColumnShape:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)


def _is_cell_connect(schema: dict[str, Any]) -> bool:
    fields = schema.get("fields") or []
    return (schema.get("type") == "struct" and str(schema.get("name") or "").endswith(".Cell")
            and len(fields) == 1 and fields[0].get("field") == "value")


def _logical(schema: dict[str, Any]) -> Logical | None:
    name = schema.get("name")
    if name == DATE:
        return "date"
    if name == TIMESTAMP:
        return "timestamp"
    return None


def _collection(value: T.DataType, elements: T.DataType | None) -> Collection | None:
    if isinstance(value, T.ArrayType) and _is_entry_struct(value.elementType):
        return "map"
    if elements is None or not isinstance(elements, T.StructType) or "added" not in elements.fieldNames():
        return None
    added = elements["added"].dataType
    if isinstance(added, T.StructType):
        return "udt"
    if isinstance(added, T.ArrayType) and _is_entry_struct(added.elementType):
        return "list"  # a map's value is an entry array too (handled above); a list's is a plain array
    return "set"


def shape_from_connect(row_schema: dict[str, Any]) -> TableShape:
    """The shape of an `after`/`before` Connect struct schema."""
    row_type = connect_to_spark(row_schema)
    assert isinstance(row_type, T.StructType)
    fields = {f["field"]: f for f in row_schema.get("fields", [])}
    columns = []
    for field in row_schema.get("fields", []):
        name = field["field"]
        if name.endswith(ELEMENTS_SUFFIX) and name[: -len(ELEMENTS_SUFFIX)] in fields:
            continue
        elements = fields.get(name + ELEMENTS_SUFFIX)
        elements_type = connect_to_spark(elements) if elements is not None else None
        if _is_cell_connect(field):
            inner = field["fields"][0]
            inner_type = connect_to_spark(inner)
            columns.append(ColumnShape(name, False, inner_type, _logical(inner),
                                       _collection(inner_type, elements_type), elements is not None))
        else:
            columns.append(ColumnShape(name, True, connect_to_spark(field), _logical(field)))
    return TableShape(tuple(columns), row_type)


def plain_shape_from_connect(row_schema: dict[str, Any], key_names: frozenset[str] = frozenset()) -> TableShape:
    """The shape of an advanced-format `after`/`before` Connect schema: every field a plain value
    (no cell, no `X__elements` companion); the key columns are the ones `key_names` names (the
    schema does not mark them)."""
    row_type = connect_to_spark(row_schema)
    assert isinstance(row_type, T.StructType)
    columns = []
    for field in row_schema.get("fields", []):
        data_type = connect_to_spark(field)
        columns.append(ColumnShape(field["field"], field["field"] in key_names, data_type, _logical(field),
                                   _collection(data_type, None)))
    return TableShape(tuple(columns), row_type)


def plain_shape_from_spark(row_type: T.StructType, key_names: frozenset[str] = frozenset()) -> TableShape:
    """The shape of an inferred (schemaless JSON) advanced-format row type: plain values."""
    columns = tuple(ColumnShape(f.name, f.name in key_names, f.dataType, None, _collection(f.dataType, None))
                    for f in row_type.fields)
    return TableShape(columns, row_type)


def _is_cell_spark(data_type: T.DataType) -> bool:
    return isinstance(data_type, T.StructType) and data_type.fieldNames() == ["value"]


def shape_from_spark(row_type: T.StructType, key_names: set[str]) -> TableShape:
    """The shape of an inferred (schemaless JSON) row type. Key columns are the Kafka key's fields;
    a cell that was null in every message of the batch is inferred as a string: its type then
    comes from its element changes when it has some (a set's, map's, list's or UDT's added part)."""
    names = set(row_type.fieldNames())
    columns = []
    for field in row_type.fields:
        name = field.name
        if name.endswith(ELEMENTS_SUFFIX) and name[: -len(ELEMENTS_SUFFIX)] in names:
            continue
        elements = row_type[name + ELEMENTS_SUFFIX].dataType if name + ELEMENTS_SUFFIX in names else None
        if name in key_names:
            columns.append(ColumnShape(name, True, field.dataType))
            continue
        if _is_cell_spark(field.dataType):
            assert isinstance(field.dataType, T.StructType)
            inner = field.dataType["value"].dataType
        else:
            inner = _type_from_elements(elements) or T.StringType()
        columns.append(ColumnShape(name, False, inner, None, _collection(inner, elements), elements is not None))
    return TableShape(tuple(columns), row_type)


def _type_from_elements(elements: T.DataType | None) -> T.DataType | None:
    if not isinstance(elements, T.StructType) or "added" not in elements.fieldNames():
        return None
    added = elements["added"].dataType
    if isinstance(added, T.StructType):
        return added  # a UDT
    if isinstance(added, T.ArrayType):
        # a set's elements, or a map's entries; a list's entries (keyed by timeuuid text) cannot be
        # told from a map<text, V>'s without a schema and read as a map (docs/spark.md)
        return added
    return None


# ----------------------------------------------------------------------------- Avro


def avro_to_connect(schema: Any, named: dict[str, Any] | None = None, space: str = "") -> dict[str, Any]:
    """An Avro schema written by Confluent's AvroData (docs/envelope.md 4) back in Connect form,
    with `optional`, names from `connect.name` and the Date / Timestamp logical types. `space`:
    the enclosing record's namespace, which a nested record and a short reference inherit (Avro's
    Java writer leaves it out there)."""
    named = {} if named is None else named
    if isinstance(schema, str):
        for name in (f"{space}.{schema}" if space and "." not in schema else schema, schema):
            if name in named:
                return dict(named[name])
        return _avro_primitive(schema, {})
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise SparkJobError(f"unsupported Avro union {schema!r} (only [null, T])")
        return {**avro_to_connect(branches[0], named, space), "optional": True}
    kind = schema.get("type")
    if isinstance(kind, dict | list):
        return avro_to_connect(kind, named, space)
    if kind == "record":
        full_name = _full_name(schema, space)
        result: dict[str, Any] = {"type": "struct", "fields": [], "optional": False,
                                  "name": schema.get("connect.name") or full_name}
        named[full_name] = result
        inner = full_name.rpartition(".")[0]
        for field in schema.get("fields", []):
            converted = avro_to_connect(field["type"], named, inner)
            result["fields"].append({**converted, "field": field["name"]})
        return result
    if kind == "array":
        return {"type": "array", "items": avro_to_connect(schema["items"], named, space), "optional": False}
    if kind == "map":
        return {"type": "map", "keys": {"type": "string", "optional": False},
                "values": avro_to_connect(schema["values"], named, space), "optional": False}
    if kind == "enum":
        return {"type": "string", "optional": False}
    if isinstance(kind, str):
        return _avro_primitive(kind, schema)
    raise SparkJobError(f"unsupported Avro schema {schema!r}")


def _full_name(schema: dict[str, Any], space: str) -> str:
    name = str(schema.get("name", ""))
    if "." in name:
        return name
    namespace = schema.get("namespace", space)  # "" (written or inherited): the null namespace
    return f"{namespace}.{name}" if namespace else name


def _avro_primitive(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    logical = schema.get("logicalType")
    connect_type = schema.get("connect.type")
    mapping = {"boolean": "boolean", "int": "int32", "long": "int64", "float": "float", "double": "double",
               "bytes": "bytes", "string": "string", "fixed": "bytes"}
    if kind not in mapping:
        raise SparkJobError(f"unsupported Avro type {kind!r}")
    result: dict[str, Any] = {"type": connect_type or mapping[kind], "optional": False}
    if logical == "date":
        result["name"] = DATE
    elif logical == "timestamp-millis":
        result["name"] = TIMESTAMP
    elif schema.get("connect.name"):
        result["name"] = schema["connect.name"]
    return result


def conform(value: Any, source: T.DataType, target: T.DataType) -> Any:
    """`value` (a Column of type `source`) as type `target`. Schemaless JSON infers a field that was
    null in every message as string: such a placeholder becomes a typed null; structs and arrays
    are conformed member by member (missing members are null)."""
    from pyspark.sql import functions as F

    if source == target:
        return value
    if isinstance(source, T.StringType | T.NullType):
        return F.lit(None).cast(target) if not isinstance(target, T.StringType) else value
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        members = []
        for field in target.fields:
            if field.name in source.fieldNames():
                member = conform(value[field.name], source[field.name].dataType, field.dataType)
                members.append(member.alias(field.name))
            else:
                members.append(F.lit(None).cast(field.dataType).alias(field.name))
        return F.when(value.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*members))
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        return F.transform(value, lambda item: conform(item, source.elementType, target.elementType))
    return value.cast(target)
