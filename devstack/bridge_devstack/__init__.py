"""The development distribution of scylla-cdc-bridge (devstack/pyproject.toml): the CDC emulator
(`sim`), the local stack (`stack`), the in-memory twins (`testing`) and the demo. The product
(`bridge`) never imports it and ships without it."""
