"""The REST API's listener settings in Kafka Connect's names: `listeners` (comma-separated
`http://host:port` or `https://host:port`; empty: not served) and the client-certificate mode
`listeners.https.ssl.client.auth` (Connect's `ssl.client.auth`: none, requested, required).
Parsed here once, so `config check` refuses a bad listener before anything starts."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator

CLIENT_AUTH_MODES = ("none", "requested", "required")


@dataclass(frozen=True)
class Listener:
    scheme: str  # http or https
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """Whether only this host can reach it (127.0.0.0/8, ::1, localhost)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to any interface

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_listeners(text: str) -> list[Listener]:
    """The listeners of `text`; raises ValueError naming the one that cannot be served."""
    listeners = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        try:
            url = urlsplit(part)
            port = url.port
        except ValueError:
            raise ValueError(f"{part!r} is not scheme://host:port") from None
        if url.scheme.lower() not in ("http", "https") or url.hostname is None or port is None:
            raise ValueError(f"{part!r} is not http://host:port or https://host:port")
        if url.path not in ("", "/") or url.query or url.username:
            raise ValueError(f"{part!r}: a listener is scheme://host:port only")
        listeners.append(Listener(url.scheme.lower(), url.hostname, port))
    if len({(item.host, item.port) for item in listeners}) < len(listeners):
        raise ValueError("two listeners on one host and port")
    return listeners


def _listeners(value: str) -> str:
    parse_listeners(value)
    return ",".join(str(item) for item in parse_listeners(value))


def _client_auth(value: str) -> str:
    if value.lower() not in CLIENT_AUTH_MODES:
        raise ValueError(f"must be one of {', '.join(CLIENT_AUTH_MODES)}")
    return value.lower()


ListenersText = Annotated[str, BeforeValidator(lambda value: "" if value is None else value),
                          AfterValidator(_listeners)]
ClientAuthText = Annotated[str, AfterValidator(_client_auth)]
