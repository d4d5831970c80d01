"""The control plane: the connector's target state (STARTED, PAUSED, STOPPED) and restart
requests, kept in the compacted control topic (Kafka Connect's `config.storage.topic`) that every
worker follows, and the connector's status in Kafka Connect's shape, computed from what each
worker reports it has applied in the status topic. The worker (`bridge/worker/`), the command
line and the REST server (`bridge/control/rest/`) use it; it sits above settings and kafka."""
