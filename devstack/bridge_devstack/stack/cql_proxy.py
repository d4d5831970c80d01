"""A CQL-protocol proxy that shows the emulator's metadata keyspace as `system_distributed`.

Clients that hard-code ScyllaDB's `system_distributed.cdc_generation_timestamps` and
`cdc_streams_descriptions_v2` (scylla-cdc-java, hence the Java connector) cannot read them from
Cassandra, which refuses tables in its own `system_distributed`. The emulator writes them to a
keyspace whose name has the same 18 characters (`SimSettings.vnodes_keyspace`); this proxy, put
between such a client and Cassandra, replaces `system_distributed` by that name in every frame the
client sends (QUERY, PREPARE, BATCH, ...) and the name back in every frame Cassandra answers
(rows, prepared metadata, schema rows and events). Equal lengths leave every length field of the
frames unchanged, so frames are copied with their bytes swapped, never re-encoded.

Limits, by design of a test-stack tool: protocol v3/v4 frames only (a v5 client is answered with
a protocol error, and drivers then downgrade to v4: v5 segments carry checksums over the bytes);
compressed frames are refused (the Java driver 3 compresses nothing by default); a data value
that happens to contain the 18 bytes is renamed too.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from dataclasses import dataclass, field

import structlog

log = structlog.get_logger(__name__)

SCYLLA_KEYSPACE = b"system_distributed"
_HEADER = struct.Struct(">BBhBI")  # version (high bit: response), flags, stream, opcode, body length
_OP_ERROR = 0x00
_PROTOCOL_ERROR = 0x000A
_COMPRESSED = 0x01
_MAX_BODY = 256 << 20  # the protocol's own limit is 256 MB


def replacement_name(name: str) -> bytes:
    """The keyspace shown as system_distributed: exactly as long, else the frames' lengths change."""
    raw = name.encode()
    if len(raw) != len(SCYLLA_KEYSPACE) or not name.replace("_", "a").isalnum():
        raise ValueError(
            f"cql proxy: the metadata keyspace must be a plain name of {len(SCYLLA_KEYSPACE)} characters"
            f" to stand for {SCYLLA_KEYSPACE.decode()}, got {name!r}"
        )
    return raw


def _error_frame(version: int, stream: int, message: str) -> bytes:
    text = message.encode()
    body = struct.pack(">iH", _PROTOCOL_ERROR, len(text)) + text
    return _HEADER.pack(0x80 | version, 0, stream, _OP_ERROR, len(body)) + body


class _Refused(Exception):
    """A frame the proxy cannot rename; the connection is closed after the client was told."""


@dataclass
class CqlRenamingProxy:
    """Listens on `listen_port` (127.0.0.1) and forwards to `upstream_host:upstream_port`."""

    listen_port: int
    upstream_host: str
    upstream_port: int
    keyspace: str
    _name: bytes = field(init=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)
    _server: asyncio.Server | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._name = replacement_name(self.keyspace)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        old: bytes,
        new: bytes,
        client: asyncio.StreamWriter | None,
    ) -> None:
        """Frames from `reader` to `writer`, renamed; `client` is the client's writer when `reader`
        is the client (to answer a frame it cannot pass)."""
        try:
            while True:
                header = await reader.readexactly(_HEADER.size)
                version, flags, stream, _opcode, length = _HEADER.unpack(header)
                if length > _MAX_BODY:
                    raise _Refused(f"frame body of {length} bytes")
                body = await reader.readexactly(length)
                if client is not None and (version & 0x7F) > 4:
                    # The client is told as Cassandra tells it; drivers retry with v4 on a new connection.
                    client.write(_error_frame(4, stream, f"Invalid or unsupported protocol version ({version & 0x7F})"))
                    await client.drain()
                    raise _Refused(f"protocol v{version & 0x7F}")
                if flags & _COMPRESSED:
                    raise _Refused("compressed frame")
                writer.write(header + body.replace(old, new))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, _Refused) as exc:
            if isinstance(exc, _Refused):
                log.info("cql proxy closed a connection", reason=str(exc))
        finally:
            writer.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError as exc:
            log.warning("cql proxy cannot reach the server", error=str(exc))
            client_writer.close()
            return
        with contextlib.suppress(asyncio.CancelledError):  # stop() cancels the connections
            await asyncio.gather(
                self._pump(client_reader, up_writer, SCYLLA_KEYSPACE, self._name, client_writer),
                self._pump(up_reader, client_writer, self._name, SCYLLA_KEYSPACE, None),
            )

    def start(self) -> None:
        """Serve on a daemon thread of its own (its own event loop) until `stop`."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._serve, "127.0.0.1", self.listen_port)
                )
            except OSError as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="cql-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise RuntimeError(f"cql proxy: cannot listen on 127.0.0.1:{self.listen_port}: {failure[0]}")
        log.info("cql proxy listening", port=self.listen_port, upstream=f"{self.upstream_host}:{self.upstream_port}")

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        """Close the listener and every proxied connection, then end the thread."""
        loop = self._loop
        if loop is None or not loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
