"""Emulator settings: where Cassandra is, where the stream metadata goes, the virtual topology.

Defaults (and their environment overrides):

- `contact_points` ``("127.0.0.1",)`` (`CDC_BRIDGE_SIM_CONTACT_POINTS`, comma separated) and
  `port` 9042 plus the local stack's `CDC_BRIDGE_STACK_PORT_OFFSET` (`CDC_BRIDGE_SIM_PORT`): the
  Cassandra the emulator writes to.
- `vnodes_keyspace` ``sim_system_distributed``
  (`CDC_BRIDGE_SCYLLA_CDC_METADATA_VNODES_KEYSPACE`, the same variable the bridge reads, so one
  environment points both at the same tables): holds `cdc_generation_timestamps` and
  `cdc_streams_descriptions_v2`.
- `tablets_keyspace` ``sim_system`` (`CDC_BRIDGE_SCYLLA_CDC_METADATA_TABLETS_KEYSPACE`): holds
  `cdc_timestamps`, `cdc_streams`, and the emulator's copies of `scylla_keyspaces` and
  `scylla_tables` (keyspace modes and CDC options, which Cassandra has no place for).
- `nodes` 1, `vnodes_per_node` 8, `shards_per_node` 2: the virtual topology of the first vnode
  generation (`CDC_BRIDGE_SIM_NODES`, `..._VNODES_PER_NODE`, `..._SHARDS_PER_NODE`).
- `sharding_ignore_msb` 12: ScyllaDB's default `murmur3_partitioner_ignore_msb_bits`.
- `first_generation_age_s` 60 s: how far in the past the first generation starts, so writes work
  at once (a fresh ScyllaDB needs about a minute before its first generation operates).
- `generation_refresh_s` 1 s: how often an emulator looks for generations or stream sets that
  another process published.
- `initial_tablets` 4: tablets of a new table in a tablets keyspace without an `'initial'` option.
- `new_stream_set_delay_s` 2 s: how far in the future a tablet split/merge/change starts.
- `bootstrap_delay_s` 5 s: how far in the future `bootstrap_node` starts its generation
  (ScyllaDB uses 2 x ring_delay + leeway, about a minute; tests cannot wait that long). Below
  the 5 s leeway plus `generation_refresh_s`, a write timestamped ahead of the clock (as the
  leeway allows) and issued before the generation was published or seen goes to a stream of the
  generation before, past that one's end, where no reader looks; ScyllaDB never has such writes.
  A test that switches generations that soon keeps them in a metadata keyspace of its own
  (`vnodes_keyspace`), or every test writing ahead on the same stack loses writes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from pydantic import TypeAdapter, ValidationError

from bridge_devstack.sim.errors import ConfigurationError

DEFAULT_PORT = 9042
ENV_PREFIX = "CDC_BRIDGE_SIM_"
ENV_VNODES_KEYSPACE = "CDC_BRIDGE_SCYLLA_CDC_METADATA_VNODES_KEYSPACE"
ENV_TABLETS_KEYSPACE = "CDC_BRIDGE_SCYLLA_CDC_METADATA_TABLETS_KEYSPACE"


@dataclass(frozen=True, slots=True)
class SimSettings:
    contact_points: tuple[str, ...] = ("127.0.0.1",)
    port: int = DEFAULT_PORT
    vnodes_keyspace: str = "sim_system_distributed"
    tablets_keyspace: str = "sim_system"
    nodes: int = 1
    vnodes_per_node: int = 8
    shards_per_node: int = 2
    sharding_ignore_msb: int = 12
    first_generation_age_s: float = 60.0
    generation_refresh_s: float = 1.0
    initial_tablets: int = 4
    new_stream_set_delay_s: float = 2.0
    bootstrap_delay_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("vnodes_keyspace", "tablets_keyspace"):
            value = getattr(self, name)
            if not value or not value.replace("_", "a").isalnum():
                raise ConfigurationError(f"{name}: {value!r} is not a valid keyspace name")
        for name in ("port", "nodes", "vnodes_per_node", "shards_per_node", "initial_tablets"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.sharding_ignore_msb < 64:
            raise ConfigurationError("sharding_ignore_msb: must be in 0..63")
        if self.initial_tablets & (self.initial_tablets - 1):
            raise ConfigurationError(f"initial_tablets: must be a power of 2, got {self.initial_tablets}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> SimSettings:
        """Defaults, then environment variables, then explicit `overrides` (None values ignored).
        The default port follows the local stack's `CDC_BRIDGE_STACK_PORT_OFFSET`, as every
        other command's does. A bad value raises ConfigurationError naming the variable."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        sources: dict[str, str] = {}  # field -> the variable it was read from
        offset = env.get(ENV_PORT_OFFSET, "").strip()
        if offset:
            values["port"], sources["port"] = _offset_port(offset), ENV_PORT_OFFSET
        for name, variable in _ENV_NAMES.items():
            if variable in env:
                text = env[variable]
                values[name] = [p.strip() for p in text.split(",") if p.strip()] if name == "contact_points" else text
                sources[name] = variable
        for name, value in overrides.items():
            if value is not None:
                values[name] = value
                sources.pop(name, None)
        try:
            return _ADAPTER.validate_python(values)
        except ValidationError as error:
            first = error.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "settings"
            raise ConfigurationError(f"{sources.get(name, name)}: {first['msg'].lower()}") from None
        except ConfigurationError as error:
            name, _, reason = str(error).partition(": ")
            raise ConfigurationError(f"{sources.get(name, name)}: {reason}") from None


ENV_PORT_OFFSET = "CDC_BRIDGE_STACK_PORT_OFFSET"
# The variable of each field: CDC_BRIDGE_SIM_<FIELD>, except the metadata keyspaces, which use the
# bridge's own variables so that one environment points both at the same tables.
_ENV_NAMES = {
    f.name: {"vnodes_keyspace": ENV_VNODES_KEYSPACE, "tablets_keyspace": ENV_TABLETS_KEYSPACE}.get(
        f.name, ENV_PREFIX + f.name.upper()
    )
    for f in fields(SimSettings)
}
# pydantic converts the environment's text to each field's type (lax mode: "3" -> 3) and runs
# __post_init__, so the field types are the one description of what a setting accepts.
_ADAPTER = TypeAdapter(SimSettings)


def _offset_port(offset: str) -> int:
    try:
        return DEFAULT_PORT + int(offset)
    except ValueError:
        raise ConfigurationError(f"{ENV_PORT_OFFSET}: {offset!r} is not a whole number") from None
