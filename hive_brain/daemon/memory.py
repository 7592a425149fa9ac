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


_MADV_PAGEOUT = 21  # Linux >= 5.4 (asm-generic/mman-common.h)


def page_out(name_part: str) -> int:
    """Ask the kernel to reclaim this process's resident pages of the read-only mappings of every
    file whose name contains ``name_part`` (a shared library's code and constants): ``MADV_PAGEOUT``
    never loses data, clean file pages are simply read again when next used. For code a warm server
    ran once (LanceDB's table read: ~50 MB of its library's pages, measured) and will not run again
    until the next write. Returns the bytes advised; 0 off Linux or on a kernel without it."""
    if _LIBC is None or not hasattr(_LIBC, "madvise"):
        return 0
    madvise = _LIBC.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    advised = 0
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split(maxsplit=5)
        # Writable mappings hold relocated data and the like: never touched here.
        if len(parts) < 6 or "w" in parts[1] or name_part not in parts[5].rsplit("/", 1)[-1]:
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if madvise(start, end - start, _MADV_PAGEOUT) == 0:
            advised += end - start
    return advised
