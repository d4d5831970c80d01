"""The PySpark jobs (docs/spark.md): `flatten` (ExtractNewRecordState semantics, to Kafka exactly
once and/or Delta), `mirror` (one Delta table per source table, equal to it) and `history` (every
version of every row).

In wings, imports pointing down only (pyproject.toml's layers contract): `command` (the flags,
`python -m bridge.spark`) > `history_job` | `compact_job` > `runner` > `jobs` (stream wiring) >
`flatten/` | `mirror/` | `history/` (the jobs, independent) > `fold/` (shared by mirror and
history) > `core/` (shared by all).

Reading order: `core.session` (packages) -> `jobs` -> `core.decode` (micro-batch -> groups per
topic and schema, `core.shape`, `core.avro`) -> `flatten.flatten` + `core.output_schema` ->
`flatten.kafka_sink` (driver) + `flatten.kafka_tasks` (the tasks produce); `core.progress` (a log
line per micro-batch), `core.fatal` (failures exit); `mirror.writer` -> `fold.batch_reader` (+
`core.known_schemas`, `core.batch_offsets`: a micro-batch read once) -> `fold.frames` +
`fold.tombstones` -> `fold.events` (the events, `fold_rows`) -> `fold.arrow_fold` (the fold in
Python over Arrow), whose semantics `fold.reference` models in pure Python (the reference the tests
compare it with); `history.writer` -> `history.arrow` -> `history.versions`.
Nothing here is imported by the rest of the bridge but `bridge/cli/spark.py` (`command`); pyspark
comes with the `spark` extra.
"""
