"""The PySpark jobs (docs/spark.md): `flatten` (ExtractNewRecordState semantics, to Kafka exactly
once and/or Delta) and `mirror` (one Delta table per source table, equal to it).

Reading order: `session` (packages) -> `jobs` (stream wiring) -> `decode` (micro-batch -> groups
per topic and schema, `shape`, `avro`) -> `flatten` + `output_schema` -> `kafka_sink` (driver) +
`kafka_tasks` (the tasks produce); `progress` (a log line per micro-batch), `fatal` (failures exit);
`mirror` -> `mirror_frames` + `mirror_tombstones` -> `mirror_fold` (the events, `fold_rows`) ->
`arrow_fold` (the fold in Python over Arrow), whose semantics `fold` models in pure Python (the
reference the tests compare it with).
Nothing here is imported by the rest of the bridge; pyspark comes with the `spark` extra.
"""
