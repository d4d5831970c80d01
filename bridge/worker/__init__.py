"""One worker process: slots -> group readers -> translate -> serialize -> one Kafka transaction.

`loop.py` wires the parts; `ownership.py` decides which groups run here; `tuning.py` sets the
interpreter up for streaming. docs/architecture.md follows one log row through them.
"""

from bridge.worker.loop import Worker

__all__ = ["Worker"]
