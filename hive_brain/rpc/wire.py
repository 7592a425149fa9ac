"""One request line to the server and its answer line, over a Unix socket: the exchange both clients
make (``rpc.client.call`` and the prompt hook's fast path, ``agents/quick.py``).

``_socket`` rather than ``socket``: the hook's fast path must not import ``socket`` (with ``enum`` and
``selectors`` behind it, a few ms of every prompt), and the C module has every call needed here.
"""

from __future__ import annotations

import os
import sys
import time

SOCKET_NAME = "server.sock"
# Exists while a server is ready to answer: a starting server can hold the GIL for seconds (loading
# the model), so a reader that connected then would wait out its whole deadline for nothing.
READY_NAME = "server.ready"
MAX_LINE = 64 * 1024 * 1024  # a recall with --detail full can be large; anything bigger is a broken peer
# sun_path is 108 bytes on Linux and 104 on the BSDs/macOS, both including the final NUL.
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103


def ready(state_dir: str) -> bool:
    """The vault's server says it is ready and its process is alive: ``server.ready`` holds the
    server's pid, so the marker a ``kill -9`` left behind is not believed (a client would dial a dead
    socket first, and a hook would not start a new server). An empty marker (an older server) counts."""
    try:
        with open(os.path.join(state_dir, READY_NAME), "rb") as f:
            text = f.read(32).strip()
    except OSError:
        return False
    if not text:
        return True
    try:
        pid = int(text)
    except ValueError:
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, someone else's (a reused pid): its socket will refuse us
        return True
    return True


def fallback_socket_dir() -> str:
    return f"/tmp/hive-brain-{os.getuid()}"


def socket_path(state_dir: str) -> str:
    """Where the server of the vault whose per-device state dir is ``state_dir`` listens:
    ``<state_dir>/server.sock`` when it fits in a Unix socket address, else a name derived only from
    ``state_dir`` in :func:`fallback_socket_dir` (so a client never has to read a file to find it)."""
    state = os.path.realpath(state_dir)
    path = os.path.join(state, SOCKET_NAME)
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        return path
    try:
        from _sha1 import sha1  # the C module behind hashlib.sha1, without hashlib's OpenSSL load
    except ImportError:
        from hashlib import sha1
    return os.path.join(fallback_socket_dir(), sha1(os.fsencode(state)).hexdigest()[:16] + ".sock")


def usable(path: str) -> bool:
    """A socket in the shared ``/tmp`` fallback folder counts only when that folder is ours alone: one
    we did not create could hold someone else's socket."""
    folder = os.path.dirname(path)
    if os.path.basename(path) == SOCKET_NAME:
        return True
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return st.st_mode & 0o170000 == 0o040000 and st.st_uid == os.getuid() and not st.st_mode & 0o077


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
