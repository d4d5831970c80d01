"""Emulator settings from the environment: types from the field annotations (pydantic), the
stack's port offset as the default port, errors naming the variable."""

from __future__ import annotations

import pytest

from bridge_devstack.sim.errors import ConfigurationError
from bridge_devstack.sim.settings import SimSettings


def test_environment_then_overrides() -> None:
    env = {"CDC_BRIDGE_SIM_CONTACT_POINTS": "a, b,", "CDC_BRIDGE_SIM_NODES": "3",
           "CDC_BRIDGE_SIM_FIRST_GENERATION_AGE_S": "1.5",
           "CDC_BRIDGE_SCYLLA_CDC_METADATA_TABLETS_KEYSPACE": "tabs"}
    settings = SimSettings.from_env(env, nodes=5, port=None)
    assert settings.contact_points == ("a", "b") and settings.nodes == 5
    assert settings.first_generation_age_s == 1.5 and settings.tablets_keyspace == "tabs"
    assert settings.port == 9042 and SimSettings.from_env({}) == SimSettings()


def test_the_stack_port_offset_moves_the_default_port_only() -> None:
    """`cdc-bridge sim ...` beside a private stack (CDC_BRIDGE_STACK_PORT_OFFSET) writes into
    that stack's Cassandra, as every other command does."""
    assert SimSettings.from_env({"CDC_BRIDGE_STACK_PORT_OFFSET": "30000"}).port == 39042
    assert SimSettings.from_env({"CDC_BRIDGE_STACK_PORT_OFFSET": "30000", "CDC_BRIDGE_SIM_PORT": "19042"}).port == 19042
    assert SimSettings.from_env({"CDC_BRIDGE_STACK_PORT_OFFSET": "30000"}, port=7).port == 7


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CDC_BRIDGE_SIM_NODES": "x"}, "CDC_BRIDGE_SIM_NODES: input should be a valid integer"),
        ({"CDC_BRIDGE_SIM_NODES": "0"}, "CDC_BRIDGE_SIM_NODES: must be at least 1, got 0"),
        ({"CDC_BRIDGE_SIM_INITIAL_TABLETS": "3"}, "CDC_BRIDGE_SIM_INITIAL_TABLETS: must be a power of 2, got 3"),
        ({"CDC_BRIDGE_STACK_PORT_OFFSET": "q"}, "CDC_BRIDGE_STACK_PORT_OFFSET: 'q' is not a whole number"),
        ({"CDC_BRIDGE_SCYLLA_CDC_METADATA_VNODES_KEYSPACE": "a-b"},
         "CDC_BRIDGE_SCYLLA_CDC_METADATA_VNODES_KEYSPACE: 'a-b' is not a valid keyspace name"),
    ],
)
def test_a_bad_variable_is_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        SimSettings.from_env(env)
    assert str(error.value).startswith(message)


def test_a_bad_override_is_named_by_its_field() -> None:
    with pytest.raises(ConfigurationError, match=r"^port: must be at least 1, got 0$"):
        SimSettings.from_env({}, port=0)
