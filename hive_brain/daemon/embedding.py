"""The server's background embedder and vector-table compaction.

Run only by the indexing thread (:mod:`.indexing`), between catch-ups. Pending passages are embedded
in slices of about ``EMBED_SLICE_S`` of model time, so a new edit never waits behind a long run;
slices only fill the embedding cache, and the vector table is written in upserts of up to
``FLUSH_ROWS`` rows and compacted now and then (see ``FLUSH_ROWS`` for why).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import LockTimeout

if TYPE_CHECKING:
    from ..index.indexer import Indexer

EMBED_SLICE_S = 0.25  # target length of one background embedding slice (model time)
# Vectors are computed into the embedding cache in short slices, then written in one upsert of up to
# this many rows: every LanceDB write adds a fragment and a version, and a table of thousands of tiny
# fragments searches ~20x slower and holds far more memory (measured: 1,100 fragments -> 240 ms).
FLUSH_ROWS = 256
# ONNX Runtime keeps its arena at the largest batch it has seen: small batches cap the resident memory
# (batch 16 of 300-token passages costs ~100 MB more than batch 4) at little cost in throughput.
MAX_CHUNK = 8
COMPACT_AFTER_WRITES = 32  # vector-table writes (upserts, deletions) between compactions
COMPACT_MIN_INTERVAL_S = 60.0


class BackgroundEmbedder:
    """Embedding and compaction state of one server (touched by the indexing thread only)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.log: logging.Logger = logging.getLogger("hive_brain.server")
        self.chunk = 4  # passages per model call, adapted to EMBED_SLICE_S
        self.embed_after = 0.0  # monotonic time before which no slice starts (after a lock miss or a failure)
        self.todo: list[tuple[str, str]] | None = None  # (text hash, text) still to embed before the next flush
        self.plain = False  # the queue could not be read: small plain embed_pending steps instead
        self.vec_writes = 0
        self.compacted_at = 0.0
        self.compact_after = COMPACT_AFTER_WRITES

    # -- scheduling (called under the indexing loop's condition) ---------------------------------
    def next_action(self, pending: int, now: float, busy: bool) -> str:
        """"embed", "compact" or "" for the indexing loop's next idle step. ``busy``: a request is
        being answered (queries share the ONNX session and the cores, so they go first)."""
        if pending > 0 and now >= self.embed_after and not busy:
            return "embed"
        if not pending and self.vec_writes >= self.compact_after and now - self.compacted_at >= COMPACT_MIN_INTERVAL_S:
            return "compact"
        return ""

    def wake_at(self, pending: int, now: float) -> float | None:
        return max(self.embed_after, now + 0.02) if pending else None

    def index_changed(self) -> None:
        """A catch-up changed the index: one more vector write, and the prewarm list is stale."""
        self.vec_writes += 1
        self.todo = None

    # -- work (indexing thread, outside the condition) -------------------------------------------
    def slice(self, idx: Indexer) -> int | None:
        """One short step of background embedding: fill the cache for the next FLUSH_ROWS pending
        passages a few at a time, then write them to the vector table in one upsert. Returns the
        passages still pending after a write, None when nothing was written."""
        try:
            if self.todo is None and not self.plain:
                self.todo = self._uncached(idx)
                self.plain = self.todo is None
            if self.plain:  # cannot read the queue ourselves: small plain steps instead
                res = idx.embed_pending(chunk=MAX_CHUNK, max_seconds=0.0, lock_timeout=1.0)
                self.vec_writes += 1
            elif self.todo:
                batch, self.todo = self.todo[: self.chunk], self.todo[self.chunk:]
                from ..index.embcache import embed_with_cache

                assert idx.embedder is not None  # uncached_pending lists passages only when there is a model
                t0 = time.monotonic()
                embed_with_cache(idx.embedder, idx.embcache, dict(batch))
                per = (time.monotonic() - t0) / len(batch)
                self.chunk = max(1, min(MAX_CHUNK, int(EMBED_SLICE_S / max(per, 1e-4))))
                return None
            else:
                # Every row of the next flush is cached: embed_pending only reads the cache and upserts.
                res = idx.embed_pending(chunk=FLUSH_ROWS, max_seconds=0.0, lock_timeout=1.0)
                self.todo = None
                self.vec_writes += 1
        except LockTimeout:
            self.embed_after = time.monotonic() + 0.5
            return None
        except Exception:  # noqa: BLE001 - a failing model must not spin; retry much later
            self.log.exception("embedding failed; retrying in 60s")
            self.todo = None
            self.embed_after = time.monotonic() + 60.0
            return None
        pending = int(res.get("pending") or 0)
        if not pending:
            self.log.info("all passages embedded")
        return pending

    def _uncached(self, idx: Indexer) -> list[tuple[str, str]] | None:
        """(hash, text) of the next FLUSH_ROWS queued passages the cache lacks, or None when the
        queue cannot be read (embedding then falls back to plain small steps)."""
        import sqlite3

        try:
            return idx.uncached_pending(FLUSH_ROWS)
        except (sqlite3.Error, ValueError, KeyError, TypeError) as e:
            self.log.warning("cannot read the pending queue (%s: %s); embedding in plain steps", type(e).__name__, e)
            return None

    def compact(self, idx: Indexer) -> None:
        """Merge the small fragments left by edits and flushes (LanceDB optimize), under the lock."""
        from ..store.lock import vault_lock

        assert idx.vectors is not None  # next_action is asked only when the snapshot has vectors
        t0 = time.monotonic()
        try:
            with vault_lock(self.state, timeout=0.5, command="serve: compact vectors"):
                idx.vectors.optimize()
        except LockTimeout:
            self.compacted_at = time.monotonic() - COMPACT_MIN_INTERVAL_S + 5.0  # try again in 5 s
            return
        except Exception:  # noqa: BLE001 - compaction is an optimisation; searching still works
            self.log.exception("vector compaction failed")
        self.vec_writes = 0
        self.compacted_at = time.monotonic()
        self.log.info("compacted the vector table in %.2fs", time.monotonic() - t0)
