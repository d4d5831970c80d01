"""The jobs on advanced-format topics (bridge.spark.core.cdc_format; issue 25), pure parts: where the
format comes from (the worker's file, the `--cdc-*` flags), what the mirror refuses, the SMT's
own `cdc.output.format`, and the per-record flattening of advanced envelopes as Debezium's
ExtractNewRecordState does it (a record is a delete when `after` is null, a truncate — dropped —
when `before` is null too; reference/ecosystem.md 2.2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.records import KafkaRecord
from bridge.envelope.settings import IncludeMode, KeyPlacement, OutputFormat
from bridge.spark.core.cdc_format import CdcFormat
from bridge.spark.core.errors import SparkJobError
from bridge.spark.core.record_flattener import RecordFlattener
from bridge.spark.core.smt_options import DeleteMode, SmtOptions
from tests.unit.spark.advanced_envelopes import FULL_ROW_1, AdvancedTable, full_after_history

WHERE = "topic T partition 0 offset 1"
TABLE = AdvancedTable("p", "ks", "t")


def test_the_format_is_legacy_unless_told_and_flags_override_the_worker_file() -> None:
    assert not CdcFormat().advanced and CdcFormat().mirror_problem() is None
    told = CdcFormat().overridden({"cdc.output.format": "advanced", "cdc.include.after": "full",
                                   "cdc.include.primary-key.placement": "payload-key,payload-after",
                                   "cdc.include.primary-key.payload-key-name": "pk_struct", "cdc.include.before": None})
    assert told.advanced and told.include_after is IncludeMode.FULL and told.include_before is IncludeMode.NONE
    assert told.placement == {KeyPlacement.PAYLOAD_KEY, KeyPlacement.PAYLOAD_AFTER}
    assert told.payload_key_name == "pk_struct" and told.mirror_problem() is None
    assert told.overridden({"cdc.output.format": "legacy"}).output_format is OutputFormat.LEGACY


@pytest.mark.parametrize(("settings", "message"), [
    ({"cdc.output.format": "fancy"}, "cdc.output.format: must be one of legacy, advanced, got 'fancy'"),
    ({"cdc.include.after": "some"}, "cdc.include.after: must be one of none, full, only-updated, got 'some'"),
    ({"cdc.include.primary-key.placement": "kafka-key,nowhere"}, "unknown placement 'nowhere'"),
])
def test_a_bad_format_setting_is_one_line_naming_it(settings: dict[str, str], message: str) -> None:
    with pytest.raises(SparkJobError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CdcFormat().overridden(settings)


@pytest.mark.parametrize(("after", "placement", "needs"), [
    ("none", "kafka-key", "cdc.include.after=full (got none: inserts and updates carry no row"),
    ("only-updated", "kafka-key", "cdc.include.after=full (got only-updated: an unchanged column and a column set"),
    ("full", "payload-after,payload-before", "kafka-key or payload-key in cdc.include.primary-key.placement"),
])
def test_the_mirror_refuses_advanced_topics_it_cannot_rebuild_the_table_from(after: str, placement: str,
                                                                              needs: str) -> None:
    problem = CdcFormat().overridden({"cdc.output.format": "advanced", "cdc.include.after": after,
                                      "cdc.include.primary-key.placement": placement}).mirror_problem()
    assert problem is not None and problem.startswith(f"mirror: advanced topics need {needs}")
    assert "\n" not in problem


def test_the_worker_file_gives_the_format_and_a_flag_overrides_it(tmp_path: Path) -> None:
    from bridge.spark.runner import JobRequest, source_options

    config = tmp_path / "worker.properties"
    config.write_text("name=w\ntopic.prefix=p\nscylla.cluster.ip.addresses=127.0.0.1:9042\nscylla.table.names=ks.t\n"
                      "kafka.bootstrap.servers=127.0.0.1:9092\ncdc.output.format=advanced\ncdc.include.after=full\n"
                      "cdc.include.primary-key.placement=kafka-key,payload-key\n")
    source = source_options(JobRequest(checkpoint=str(tmp_path / "c"), config=config))
    assert source.cdc.advanced and source.cdc.include_after is IncludeMode.FULL
    assert source.cdc.placement == {KeyPlacement.KAFKA_KEY, KeyPlacement.PAYLOAD_KEY}
    flagged = source_options(JobRequest(checkpoint="c", config=config, cdc={"cdc.include.after": "none"}))
    assert flagged.cdc.include_after is IncludeMode.NONE and flagged.cdc.mirror_problem() is not None
    bare = source_options(JobRequest(checkpoint="c", bootstrap_servers="b:9092", topics="p.ks.t"))
    assert not bare.cdc.advanced


def test_the_smt_format_follows_the_topics_and_legacy_is_refused_on_advanced_ones() -> None:
    assert SmtOptions.from_properties({}).unwrap_cells
    assert not SmtOptions.from_properties({}, advanced_input=True).unwrap_cells
    assert not SmtOptions.from_properties({"cdc.output.format": "advanced"}, advanced_input=True).unwrap_cells
    with pytest.raises(SparkJobError, match=r"^cdc.output.format=legacy \(flatten option\): the topics are in the "):
        SmtOptions.from_properties({"cdc.output.format": "legacy"}, advanced_input=True)


def _bytes(record: KafkaRecord) -> bytes:
    value = JsonSerializer(schemas_enable=True).serialize(record.topic, record.value_schema, record.value)
    assert value is not None
    return value


def _flatten(record: KafkaRecord, **options: str) -> Any:
    smt = SmtOptions.from_properties(options, advanced_input=True)
    flat = RecordFlattener(smt, schemas_out=True).flatten(_bytes(record), None, lambda: WHERE)
    if flat is None:
        return None
    return orjson.loads(flat.value) if flat.value is not None else "tombstone"


def test_an_insert_with_its_post_image_is_the_row_as_it_is_and_its_schema_passes_through() -> None:
    insert = full_after_history(TABLE)[0]
    message = _flatten(insert)
    assert message["payload"] == {"pk": 1, "ck": 1, **FULL_ROW_1}
    schema = message["schema"]  # `after`'s own schema: the Java SMT in advanced mode changes nothing
    assert schema["name"] == "p.ks.t.After" and schema["optional"] is True
    assert [f["field"] for f in schema["fields"]] == ["pk", "ck", "v", "t", "s", "m", "u", "d"]
    assert schema["fields"][-1]["name"] == "org.apache.kafka.connect.data.Date"
    rewritten = _flatten(insert, **{"delete.tombstone.handling.mode": "rewrite", "add.fields": "op,ts_us"})
    assert rewritten["payload"] == {"pk": 1, "ck": 1, **FULL_ROW_1, "__deleted": "false", "__op": "c", "__ts_us": None}
    assert rewritten["schema"]["optional"] is False  # InsertField rebuilds it (copySchemaBasics)


def test_a_snapshot_row_flattens_as_an_insert() -> None:
    snapshot = full_after_history(TABLE)[6]
    assert snapshot.value is not None and snapshot.value["op"] == "r"
    message = _flatten(snapshot, **{"add.fields": "op"})
    assert message["payload"]["t"] == "snap" and message["payload"]["__op"] == "r"


def test_a_delete_without_pre_image_is_dropped_as_a_truncate_in_every_mode() -> None:
    delete = full_after_history(TABLE)[3]
    assert delete.value is not None and delete.value["before"] is None and delete.value["after"] is None
    for mode in DeleteMode:
        assert _flatten(delete, **{"delete.tombstone.handling.mode": mode.value}) is None


def test_a_delete_with_its_pre_image_follows_the_delete_mode() -> None:
    delete = TABLE.record("d", {"pk": 1, "ck": 1}, 10, before=FULL_ROW_1)
    assert _flatten(delete, **{"delete.tombstone.handling.mode": "drop"}) is None
    assert _flatten(delete)["payload"] is None  # tombstone mode: null payload under after's schema
    rewritten = _flatten(delete, **{"delete.tombstone.handling.mode": "rewrite"})
    assert rewritten["payload"] == {"pk": 1, "ck": 1, **FULL_ROW_1, "__deleted": "true"}
    assert rewritten["schema"]["name"] == "p.ks.t.Before"


def test_without_post_images_inserts_vanish_and_updates_read_as_deletes_as_in_debezium() -> None:
    """`cdc.include.after=none`: ExtractNewRecordState decides by `after` alone, not by `op`."""
    insert = TABLE.record("c", {"pk": 1, "ck": 1}, 10)
    update = TABLE.record("u", {"pk": 1, "ck": 1}, 11, before={"v": 5})
    for mode in DeleteMode:
        assert _flatten(insert, **{"delete.tombstone.handling.mode": mode.value}) is None
    assert _flatten(update, **{"delete.tombstone.handling.mode": "drop"}) is None
    assert _flatten(update)["payload"] is None
    rewritten = _flatten(update, **{"delete.tombstone.handling.mode": "rewrite"})
    assert rewritten["payload"]["v"] == 5 and rewritten["payload"]["__deleted"] == "true"


def test_the_payload_key_struct_is_not_part_of_the_flattened_row() -> None:
    table = AdvancedTable("p", "ks", "t", frozenset({"payload-key"}))
    message = _flatten(full_after_history(table)[0])
    assert message["payload"] == FULL_ROW_1  # no key column in after without payload-after
    assert "key" not in message["payload"]


def test_mirror_refuses_such_topics_before_it_starts_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One line and exit 2 from `cdc-bridge spark mirror`, with no Spark session built (that
    would cost ~10 s and start a JVM for nothing)."""
    import bridge.spark.core.session
    from bridge.cli import main

    def no_session(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a Spark session was built")

    monkeypatch.setattr(bridge.spark.core.session, "build_session", no_session)
    config = tmp_path / "worker.properties"
    config.write_text("name=w\ntopic.prefix=p\nscylla.cluster.ip.addresses=127.0.0.1:9042\nscylla.table.names=ks.t\n"
                      "kafka.bootstrap.servers=127.0.0.1:9092\ncdc.output.format=advanced\n"
                      "cdc.include.after=only-updated\n")
    code = main(["spark", "mirror", "--config", str(config), "--checkpoint", str(tmp_path / "c"),
                 "--delta", str(tmp_path / "d")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines == [lines[0]] and lines[0].startswith(
        "error: mirror: advanced topics need cdc.include.after=full (got only-updated")
