"""A TCP forwarder that opens late: a dependency that is not there when a worker starts and
answers a while later (start-up waits for it, bridge/worker/startup.py). Threads of the test
process, closed by the test; the listening port is taken only when `open()` is called."""

from __future__ import annotations

import contextlib
import socket
import threading


class LateForwarder:
    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self._listener: socket.socket | None = None
        self._closed = threading.Event()

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for end in (source, sink):
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)
