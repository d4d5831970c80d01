"""scylla-cdc-bridge: ScyllaDB CDC log tables to Debezium change events in Kafka."""

__version__ = "0.1.0"
