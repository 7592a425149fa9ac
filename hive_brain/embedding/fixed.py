"""Vectors of fixed texts, kept on disk per embedding pack.

The abstention's background sentences (``search.candidates.BACKGROUND``) are embedded by every process
that searches by meaning: pooled and per-token, 2.6 CPU-seconds together, a third of a server's start
to ``ready`` and a tax on every one-shot hybrid recall (issue 26: ready <= 5 s at 1k notes). Their
vectors depend only on the pack (:attr:`Embedder.pack_key` hashes the model and the tokenizer) and on
the texts, so they are computed once per device and read back in milliseconds. Derived data: a file
that cannot be read is recomputed and rewritten, and a cache folder that cannot be written costs only
the time it saved. Not ``index.embcache``: that is one vault's pooled vectors, and the background
needs per-token arrays too, before any vault is open.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

CACHE_DIR = "fixed-vectors"
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def cache_path(pack_key: str, kind: str, texts: Sequence[str]) -> Path:
    """``<user cache>/fixed-vectors/<pack>-<kind>-<hash of the texts>.npz``."""
    from ..config import user_cache_dir

    digest = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:16]
    pack = hashlib.sha256(pack_key.encode("utf-8")).hexdigest()[:16]  # pack keys hold ':' and a model id
    return user_cache_dir() / CACHE_DIR / f"{pack}-{kind}-{digest}.npz"


def cached(pack_key: str | None, kind: str, texts: Sequence[str],
           compute: Callable[[], list[np.ndarray]]) -> list[np.ndarray]:
    """One array per text: read from the cache when it holds them for this pack, else ``compute()``
    and keep the result. ``pack_key`` None (an embedder that names no pack): computed every time."""
    if not pack_key:
        return compute()
    path = cache_path(pack_key, kind, texts)
    try:
        with np.load(path, allow_pickle=False) as z:
            return [z[f"arr_{i}"] for i in range(len(texts))]
    except _UNREADABLE:
        pass  # absent, torn or from an older layout: computed again below
    arrays = compute()
    buf = io.BytesIO()
    np.savez(buf, *arrays)  # arr_0, arr_1, ...: one per text
    try:
        from ..store.fsutil import atomic_write_bytes

        atomic_write_bytes(path, buf.getvalue(), durable=False)
    except OSError:
        pass  # a read-only or full cache folder: the next process computes them again
    return arrays
