"""Embedding cache: (pack key, text hash) -> float32 vector, in one SQLite file.

Embedding is the slow part of indexing (roughly ten passages a second per two cores), so every
vector ever computed is kept here: rebuilds, replays and re-indexing after a crash only embed text
that was never embedded with the same pack.  WAL mode lets several processes (indexer, server,
CLI) read while one writes; writes wait politely for each other via the busy timeout.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..store.fsutil import connect_sqlite, quarantine, sqlite_damage, sqlite_tx

if TYPE_CHECKING:
    import numpy as np

    from ..embedding.embedder import Embedder

Progress = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    pack_key  TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    dim       INTEGER NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (pack_key, text_hash)
) WITHOUT ROWID
"""
# Well under SQLite's host-parameter limit (999 in old builds).
_PARAMS_PER_QUERY = 500
# Embedded vectors are committed in chunks of this many texts, so an interrupted long embedding
# run keeps everything it finished.
_COMMIT_EVERY = 256


def _setup(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    # NORMAL is durable across application crashes in WAL mode; a power cut can lose only the
    # latest commits, which are recomputable cache entries anyway.
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(_SCHEMA)


def text_hash(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes (the exact text that is embedded)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """A process- and thread-safe vector cache.  Use as a context manager or call :meth:`close`."""

    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._timeout = timeout
        # Only a cache: a damaged file is moved aside and started empty (texts are embedded again).
        self._db, _reset = connect_sqlite(self.path, _setup, timeout=timeout, check_same_thread=False)

    def _reset(self, problem: str) -> None:
        """A query met a damaged page: move the file aside and start empty (caller holds _lock)."""
        self._db.close()
        quarantine(self.path, problem)
        self._db, _reset = connect_sqlite(self.path, _setup, timeout=self._timeout, check_same_thread=False)

    def damage(self) -> str | None:
        """Check the whole file; a damaged one is moved aside and started empty. What was wrong, or None."""
        with self._lock:
            problem = sqlite_damage(self._db)
            if problem:
                self._reset(problem)
        return problem

    def get_many(self, pack_key: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached vectors for those hashes (missing ones are simply absent from the result)."""
        try:
            return self._get_many(pack_key, hashes)
        except sqlite3.DatabaseError as e:
            with self._lock:
                self._reset(str(e))
            return {}

    def _get_many(self, pack_key: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        import numpy as np  # here, not at import: a lexical rebuild checks this file and never needs numpy

        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(wanted), _PARAMS_PER_QUERY):
                chunk = wanted[start : start + _PARAMS_PER_QUERY]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT text_hash, dim, vector FROM embeddings WHERE pack_key = ? AND text_hash IN ({marks})",
                    [pack_key, *chunk],
                ).fetchall()
                for digest, dim, blob in rows:
                    if len(blob) == 4 * dim:  # a torn or foreign row is a miss, never a wrong vector
                        found[digest] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return found

    def put_many(self, pack_key: str, items: Mapping[str, np.ndarray]) -> None:
        """Store vectors (replacing any previous vector for the same key) in one transaction."""
        import numpy as np

        rows = []
        for digest, vector in items.items():
            flat = np.asarray(vector, dtype="<f4").reshape(-1)
            rows.append((pack_key, digest, int(flat.shape[0]), flat.tobytes()))
        if not rows:
            return
        with self._lock:
            try:
                self._put_rows(rows)
            except sqlite3.DatabaseError as e:
                self._reset(str(e))
                self._put_rows(rows)

    def _put_rows(self, rows: list[tuple]) -> None:
        with sqlite_tx(self._db):
            self._db.executemany(
                "INSERT OR REPLACE INTO embeddings (pack_key, text_hash, dim, vector) VALUES (?, ?, ?, ?)", rows)

    def count(self, pack_key: str) -> int:
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM embeddings WHERE pack_key = ?", (pack_key,)
            ).fetchone()
        return int(n)

    def pack_keys(self) -> dict[str, int]:
        """Every pack key with its number of cached vectors."""
        with self._lock:
            rows = self._db.execute("SELECT pack_key, COUNT(*) FROM embeddings GROUP BY pack_key").fetchall()
        return {key: int(n) for key, n in rows}

    def drop_other_packs(self, keep: str) -> int:
        """Delete vectors of every other pack key (after a model change); returns rows deleted."""
        with self._lock:
            cursor = self._db.execute("DELETE FROM embeddings WHERE pack_key <> ?", (keep,))
        return int(cursor.rowcount)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def embed_with_cache(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts_by_hash: Mapping[str, str],
    progress: Progress | None = None,
    *,
    batch_size: int = 16,
) -> dict[str, np.ndarray]:
    """Passage vectors for every hash, embedding only the texts the cache lacks for this pack.

    ``progress(done, total)`` counts texts actually embedded (cache hits are not work).  New vectors
    are committed every few hundred texts, so a run that is killed part-way loses little.
    """
    key = embedder.pack_key
    vectors = cache.get_many(key, texts_by_hash)
    missing = [digest for digest in texts_by_hash if digest not in vectors]
    total = len(missing)
    for start in range(0, total, _COMMIT_EVERY):
        chunk = missing[start : start + _COMMIT_EVERY]

        def chunk_progress(done: int, _chunk_total: int, offset: int = start) -> None:
            if progress is not None:
                progress(offset + done, total)

        embedded = embedder.embed_passages([texts_by_hash[d] for d in chunk], batch_size, chunk_progress)
        fresh = dict(zip(chunk, embedded, strict=True))
        cache.put_many(key, fresh)
        vectors.update(fresh)
    return vectors
