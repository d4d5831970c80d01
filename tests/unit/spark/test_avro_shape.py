"""`avro_to_connect` reads a registered Avro schema back in Connect form whether nested records
repeat their namespace (the bridge's text before it wrote Avro's Java form) or inherit it (the Java
connector's text, and the bridge's now)."""

from __future__ import annotations

import pytest

from bridge.envelope.avro_schema import avro_schema
from bridge.spark.core.shape import avro_to_connect
from tests.unit.envelope.support import make_table, plan_for

pytestmark = pytest.mark.unit

PLAN = plan_for(make_table(partition=[("pk", "int")], clustering=[("ck", "int")],
                           regular=[("v", "text"), ("m", "map<int, text>")]))


def _with_namespaces(schema: object, space: str = "") -> object:
    """The same schema with every record's namespace written out and every reference in full."""
    if isinstance(schema, list):
        return [_with_namespaces(branch, space) for branch in schema]
    if isinstance(schema, str):
        return f"{space}.{schema}" if space and schema[:1].isupper() and "." not in schema else schema
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") != "record":
        return {k: _with_namespaces(v, space) if k in ("type", "items", "values") else v for k, v in schema.items()}
    namespace = schema.get("namespace", space)
    fields = [{**f, "type": _with_namespaces(f["type"], namespace)} for f in schema["fields"]]
    return {**schema, "namespace": namespace, "fields": fields}


def test_inherited_and_repeated_namespaces_read_alike() -> None:
    inherited = avro_schema(PLAN.value_schema)
    repeated = _with_namespaces(inherited)
    assert repeated != inherited
    assert avro_to_connect(inherited) == avro_to_connect(repeated)
    fields = {f["field"]: f for f in avro_to_connect(inherited)["fields"]}
    assert fields["before"]["name"] == "P.ks.t.Before" and fields["after"]["name"] == "P.ks.t.After"
    assert {f["field"] for f in fields["after"]["fields"]} >= {"pk", "ck", "v", "m"}


def test_a_short_reference_resolves_in_the_enclosing_namespace() -> None:
    schema = {"type": "record", "name": "Outer", "namespace": "a.b", "fields": [
        {"name": "x", "type": {"type": "record", "name": "Inner", "fields": [{"name": "i", "type": "int"}]}},
        {"name": "y", "type": ["null", "Inner"], "default": None}]}
    fields = avro_to_connect(schema)["fields"]
    assert fields[0]["name"] == "a.b.Inner" and fields[1]["name"] == "a.b.Inner" and fields[1]["optional"]
    assert fields[1]["fields"] == fields[0]["fields"]
