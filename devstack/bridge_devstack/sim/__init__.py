"""ScyllaDB CDC emulator on real Cassandra, and a load generator (see docs/emulator.md)."""

from bridge_devstack.sim.emulator import Emulator
from bridge_devstack.sim.errors import (
    CqlSyntaxError,
    InvalidRequestError,
    ServerError,
    SimError,
    UnsupportedCqlError,
)
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.sim.values import canonical

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
