"""The REST API's pure parts: Connect's shapes, the checks of a request before anything is
written, the validate answer, basic-auth credentials and the listener settings."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from bridge.control.rest.auth import Credentials
from bridge.control.rest.shapes import RequestError, offset_edits, offsets_body, query_flag, task_id
from bridge.control.rest.validate import HIDDEN, config_infos
from bridge.kafka.offsets import encode_key, encode_value
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position
from bridge.settings import ConfigError
from bridge.settings.rest_listeners import parse_listeners

pytestmark = pytest.mark.unit
GROUP = GroupId("ks", "orders", 1_700_000_000_000, "3")
VALID = {"name": "b", "topic.prefix": "p", "scylla.cluster.ip.addresses": "h:9042", "scylla.table.names": "ks.t",
         "kafka.bootstrap.servers": "k:9092"}


def _position() -> Position:
    return Position.from_offsets_value({"window_start": "00000000-0000-1000-8000-000000000000",
                                        "window_end": "00000000-0000-1000-8000-000000000000"})


def test_boolean_parameters_are_read_in_any_case_and_others_refused() -> None:
    assert query_flag("False", "includeTasks") is False and query_flag("TRUE", "onlyFailed") is True
    assert query_flag(None, "x") is False
    with pytest.raises(RequestError) as refused:
        query_flag("yes", "includeTasks")
    assert refused.value.status == 400 and "includeTasks" in refused.value.message


def test_task_ids_are_the_slots() -> None:
    assert task_id("11", 12, "b") == 11
    for bad in ("12", "-1", "x"):
        with pytest.raises(RequestError) as refused:
            task_id(bad, 12, "b")
        assert refused.value.status == 404


def test_offsets_round_trip_in_the_topics_format() -> None:
    body = offsets_body({GROUP: _position()})
    record = body["offsets"][0]
    assert json.dumps([ "b", record["partition"]], separators=(",", ":")).encode() == encode_key("b", GROUP)
    assert json.dumps(record["offset"], separators=(",", ":")).encode() == encode_value(_position())
    edits = offset_edits(json.loads(json.dumps(body)))
    assert [(edit.group, edit.position) for edit in edits] == [(GROUP, _position())]
    assert offset_edits({"offsets": [{"partition": record["partition"], "offset": None}]})[0].position is None


@pytest.mark.parametrize("body", [
    None, [], {"offsets": {}}, {"offsets": [1]}, {"offsets": [{"partition": {"x": 1}, "offset": None}]},
    {"offsets": [{"partition": {"keyspace_name": "ks"}, "offset": {}}]},
])
def test_offset_records_of_the_wrong_shape_are_refused_whole(body: object) -> None:
    with pytest.raises(RequestError) as refused:
        offset_edits(body)
    assert refused.value.status == 400 and "\n" not in refused.value.message


def test_a_bad_record_after_good_ones_refuses_them_all() -> None:
    good = offsets_body({GROUP: _position()})["offsets"][0]
    with pytest.raises(RequestError, match=r"offsets\[1\]\.offset"):
        offset_edits({"offsets": [good, {"partition": good["partition"], "offset": {"window_start": "x"}}]})


def test_validate_reports_every_setting_unknown_keys_and_hides_secrets() -> None:
    answer = config_infos({**VALID, "scylla.user": "u", "scylla.password": "s3cret", "connector.class": "akhq.x",
                           "topics": "getPlugins", "slots.count": "0"})
    by_name = {item["value"]["name"]: item["value"] for item in answer["configs"]}
    assert {"name", "slots.count", "listeners", "topics", "connector.class"} <= set(by_name)
    assert by_name["slots.count"]["errors"] and by_name["topics"]["errors"] and by_name["connector.class"]["errors"]
    assert by_name["scylla.password"]["value"] == HIDDEN and "s3cret" not in json.dumps(answer)
    assert answer["error_count"] == sum(len(value["errors"]) for value in by_name.values()) == 3
    assert config_infos(VALID)["error_count"] == 0


def test_validate_reports_checks_across_settings() -> None:
    answer = config_infos({**VALID, "scylla.user": "u"})
    errors = {item["value"]["name"]: item["value"]["errors"] for item in answer["configs"]}
    assert errors["scylla.password"] and answer["error_count"] == 1


def test_credentials_file_and_basic_headers(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("# Connect's format\nadmin: s3cret, admin\nviewer=look\n")
    credentials = Credentials.load(path)

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert credentials.user_of(header("admin", "s3cret")) == "admin"
    assert credentials.user_of(header("viewer", "look")) == "viewer"
    for bad in (header("admin", "wrong"), header("nobody", "s3cret"), "Basic !!", "Bearer x", None, ""):
        assert credentials.user_of(bad) is None
    path.write_text("just-a-name\n")
    with pytest.raises(ConfigError, match=r"rest\.auth\.credentials\.file"):
        Credentials.load(path)


def test_listeners_in_connects_form() -> None:
    found = parse_listeners("http://0.0.0.0:8083, https://[::1]:8443")
    assert [(item.scheme, item.host, item.port, item.loopback) for item in found] == [
        ("http", "0.0.0.0", 8083, False), ("https", "::1", 8443, True)]  # noqa: S104 (parsed, not bound)
    assert parse_listeners("") == []
    for bad in ("0.0.0.0:8083", "ftp://h:1", "http://h", "http://h:1/path", "http://h:1,http://h:1"):
        with pytest.raises(ValueError):
            parse_listeners(bad)
