"""One request line to the server and its answer line, over a Unix socket: the exchange both clients
make (``rpc.client.call`` and the prompt hook's fast path, ``agents/quick.py``).

``_socket`` rather than ``socket``: the hook's fast path must not import ``socket`` (with ``enum`` and
``selectors`` behind it, a few ms of every prompt), and the C module has every call needed here.
"""

from __future__ import annotations

import os
import time


class NotSent(OSError):
    """The connection failed: the server never saw the request (a read or a write may go elsewhere)."""


def exchange(path: str, request: bytes, deadline: float, *, max_line: int) -> bytes:
    """Send ``request`` (one line) to the server listening at ``path`` and return its first answer line,
    all before ``deadline`` (``time.monotonic``). Raises :class:`NotSent` when the connection fails,
    ``TimeoutError`` or another ``OSError`` after it (the server may have the request)."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.connect(os.fspath(path))
        except OSError as e:  # no socket file, nobody listening, no time left
            raise NotSent(f"{type(e).__name__}: {e}") from None
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        sock.sendall(request)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the server closed the connection")
            chunks.append(chunk)
            size += len(chunk)
            if b"\n" in chunk:
                break
            if size > max_line:
                raise ConnectionResetError("response too large")
    finally:
        sock.close()
    return b"".join(chunks).split(b"\n", 1)[0]
