"""ScyllaDB CDC emulator on real Cassandra, and a load generator (see docs/emulator.md)."""

from bridge.sim.emulator import Emulator
from bridge.sim.errors import (
    CqlSyntaxError,
    InvalidRequestError,
    ServerError,
    SimError,
    UnsupportedCqlError,
)
from bridge.sim.settings import SimSettings
from bridge.sim.values import canonical

__all__ = [
    "CqlSyntaxError",
    "Emulator",
    "InvalidRequestError",
    "ServerError",
    "SimError",
    "SimSettings",
    "UnsupportedCqlError",
    "canonical",
]
