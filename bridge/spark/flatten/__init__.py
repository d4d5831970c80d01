"""The flatten job: `flatten` (Spark expressions), `kafka_sink` (driver) + `kafka_tasks` (the tasks
produce, exactly once)."""
