"""A TCP proxy on loopback in front of a real server (here a Chroma server) that counts the
HTTP requests passing through and can stall them: while stalled, what a client sends is
received and counted but not forwarded until ``release`` (a store that stopped answering).

    with StallProxy(("127.0.0.1", chroma.port)) as proxy:
        env["NEO_CHROMA_URL"] = proxy.url
        proxy.stall(); ...; proxy.release()
        proxy.requests          # requests the clients sent so far
"""

import re
import socket
import threading
from typing import Any

from neo_assets_tests.servers import LOOPBACK

_REQUEST_LINE = re.compile(rb"(?:GET|POST|PUT|PATCH|DELETE|HEAD) /\S* HTTP/1\.[01]\r\n")


class StallProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._server = socket.create_server((LOOPBACK, 0))
        self.port = int(self._server.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self.requests = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="stall-proxy").start()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stall(self) -> None:
        self._flowing.clear()

    def release(self) -> None:
        self._flowing.set()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            threading.Thread(target=self._up, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket) -> None:
        tail = b""
        try:
            while data := client.recv(65536):
                seen = tail + data
                with self._lock:
                    self.requests += len(_REQUEST_LINE.findall(seen)) - len(
                        _REQUEST_LINE.findall(tail)
                    )
                tail = seen[-512:]  # a request line split across two reads
                self._flowing.wait()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _down(self, upstream: socket.socket, client: socket.socket) -> None:
        try:
            while data := upstream.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self.release()
        self._server.close()

    def __enter__(self) -> "StallProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
