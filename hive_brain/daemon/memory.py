"""The server process's C heap (glibc malloc), kept small for a process that lives for days.

glibc gives every thread that allocates its own arena (up to 8 per core, 64 MB reserved each): the
server's request pool, indexer, onnxruntime and LanceDB threads each grew one, and freed memory
stayed in them, so a warm server's RSS held 0.9-1.3 GB and crept up over recalls. Two arenas and a
``malloc_trim`` once the server goes quiet give freed pages back. Off glibc (musl, macOS) both are
no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

_M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
ARENAS = 2


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _libc()


def limit_arenas(n: int = ARENAS) -> bool:
    """At most ``n`` malloc arenas for this process (call before threads start); False off glibc."""
    return bool(_LIBC is not None and _LIBC.mallopt(_M_ARENA_MAX, n) == 1)


def trim() -> bool:
    """Give the heap's free pages back to the system; False off glibc or when nothing was released."""
    return bool(_LIBC is not None and _LIBC.malloc_trim(0) == 1)
