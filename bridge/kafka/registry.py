"""The schema registry client for Avro: confluent-kafka's, against any Confluent-compatible API
(Apicurio Registry serves one at `/apis/ccompat/v7`). It is the `SchemaRegistry` the envelope's
Avro serializer registers through; the envelope package itself does no I/O."""

from __future__ import annotations

import importlib
import warnings
from typing import Any


def _registry_module() -> Any:
    """confluent_kafka.schema_registry, imported without the deprecation warning that authlib
    (which it imports) raises about its own httpx integration."""
    with warnings.catch_warnings():
        importlib.import_module("authlib.deprecate")  # installs an "always" filter; ours goes in front
        warnings.simplefilter("ignore", DeprecationWarning)
        import confluent_kafka.schema_registry as module
    return module


class RegistryClient:
    """confluent-kafka's `SchemaRegistryClient` (as `client`, for everything else it offers)."""

    def __init__(self, url: str, **config: Any) -> None:
        module = _registry_module()
        self.client: Any = module.SchemaRegistryClient({"url": url, **config})
        self._schema = module.Schema

    def register_avro(self, subject: str, schema_text: str) -> int:
        return int(self.client.register_schema(subject, self._schema(schema_text, "AVRO")))


def registry_client(url: str, **config: Any) -> RegistryClient:
    """A client of the registry at `url`; `config` takes the client's other settings (for example
    `basic.auth.user.info`, `max.retries`)."""
    return RegistryClient(url, **config)


def avro_schema_object(text: str) -> Any:
    """An Avro schema text as confluent-kafka's `Schema` (for the client's other calls)."""
    return _registry_module().Schema(text, "AVRO")
