"""The server's indexing loop and vault watcher.

* **watchdog observer** — turns file events under the vault into "dirty" marks; it never indexes.
* **indexing thread** (:meth:`IndexingLoop.run`) — the only index writer of the server process. It
  owns the writing :class:`~hive_brain.engine.Engine` (its catalog and pending-queue SQLite
  connections are bound to the thread that opened them), so memory writes sent to the server
  (:meth:`IndexingLoop.submit_write`) run here too, ahead of everything else; each is answered once its
  notes are durable, and the cycle that indexes them starts at once (:meth:`IndexingLoop.defer_publish`).
  It waits for the watcher, debounces, catches up under the vault lock with a short timeout (a CLI writer
  holding the lock only delays it; only what the watcher saw change is re-read, the vault walked every
  ``RESYNC_S``), publishes an immutable :class:`Snapshot` for readers, and between catch-ups lets the
  :class:`~.embedding.BackgroundEmbedder` embed and compact, never while a request is being answered.
  After a catch-up it runs the promotion pass once a day (:func:`promotion_pass`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import LockTimeout
from .embedding import BackgroundEmbedder

if TYPE_CHECKING:
    from ..engine import Engine
    from ..index.indexer import Indexer
    from ..index.lexical import LexicalIndex
    from ..index.vectors import VectorIndex
    from ..store.catalog import Catalog
    from ..store.vault import Vault

DEBOUNCE_S = 0.3  # editors write a note in bursts (temp file, rename, metadata); index once it is quiet
RESYNC_S = 30.0  # full stat scan as a safety net for events the watcher missed (queue overflow, NFS)
POLL_RESYNC_S = 2.0  # the scan interval when no file watcher could be started
# How long the index may trail a write the server answered, unless a read needs it sooner (a recall waits
# for it: IndexingLoop.settle): a write that follows within this time (the next CLI command, a script's
# next remember) is not queued behind the previous one's tantivy commit, and one commit indexes both.
WRITE_INDEX_DELAY_S = 0.2
# How long a cycle nobody waits for (a write's, an edit's once debounced) may wait for the requests in
# flight to be answered before it begins beside them.
CYCLE_YIELD_MAX_S = 0.25
PROMOTION_MARKER = "promotion-pass"  # <state>/promotion-pass: when a server last ran the promotion pass
PROMOTION_LOCK_S = 0.5  # a busy vault only postpones the pass to the next cycle
# Reading ahead for the reranker goes a few notes at a time, for about RERANK_SLICE_S, and stops as
# soon as a request comes in: a step of 16 notes (~40 passages) took 0.4-1 s of model time on a loaded
# machine, and a prompt arriving meanwhile waited for it past its share of the hook's deadline
# (benchmarks/cold.py: prompts during embedding at 300 notes, p95 1.2 s, one lost).
RERANK_WARM_STEP = 2
# How often a server looks for quiet transcripts (memory/conversations.capture_quiet): a stat of each
# transcript file of the installed agents, after a catch-up, at most this often (the first cycle always).
TRANSCRIPT_SCAN_S = 30.0
RERANK_SLICE_S = 0.1


def transcript_pass(eng: Engine, quiet_s: float, log: logging.Logger) -> list[str]:
    """Capture the quiet transcripts (off when ``quiet_s`` <= 0); the notes written."""
    from ..memory.conversations import capture_quiet

    if quiet_s <= 0:
        return []
    res = capture_quiet(eng, quiet_s=quiet_s, lock_timeout=PROMOTION_LOCK_S)
    if res["written"] or res["failed"] or res["busy"]:
        log.info("quiet transcripts: %d captured, %d updated, %d failed, %d left for a busy vault", res["captured"],
                 res["updated"], res["failed"], res["busy"])
    return list(res["written"])


def promotion_pass(eng: Engine, every_s: float, log: logging.Logger) -> dict[str, Any] | None:
    """The promotion pass, at most once per ``every_s`` per vault (``store.fsutil.due`` on a marker
    file, so a restarted server does not run it again the same day): Brain Review proposals only,
    never memory. The server is the owner's own process, so it proposes as the owner. Returns the
    report, or None when not due, off (``every_s`` <= 0) or postponed (vault busy: the marker is put
    back so the next cycle tries again)."""
    from ..memory.review import BrainReview
    from ..store.fsutil import due

    marker = eng.vault.state / PROMOTION_MARKER
    if every_s <= 0 or not due(marker, every_s):
        return None
    try:
        res = BrainReview(eng.memory.for_agent(None, owner_verified=True)).promote(timeout=PROMOTION_LOCK_S)
    except LockTimeout:
        with contextlib.suppress(OSError):
            marker.unlink()
        return None
    log.info("promotion pass: %d proposed, %d extended, %d skipped", len(res["proposed"]), len(res["extended"]),
             len(res["skipped"]))
    return res


class WriteJob:
    """One memory write handed to the indexing thread; the socket worker waits on ``done``."""

    def __init__(self, fn: Callable[[Any], dict]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: dict | None = None
        self.error: BaseException | None = None


@dataclass(frozen=True)
class Snapshot:
    """What readers see; replaced as a whole by the indexing thread, never mutated."""

    generation: int | None
    lexical: LexicalIndex
    vectors: VectorIndex | None
    embedder: Any
    semantic_off: str | None
    warnings: tuple[str, ...] = ()
    pending: int = 0
    # path -> sha of every note the generation indexed, known to match the catalog as the cycle that
    # made this snapshot read it (None: not known, e.g. the first catch-up could not take the lock).
    manifest: Mapping[str, str] | None = None


def watch_handler(root: Any, mark: Callable[[str, bool], None]) -> Any:
    from watchdog.events import FileSystemEventHandler

    from ..store.vault import is_ignored_dir

    root_s = os.fspath(root)

    def relevant(p: Any, is_dir: bool) -> str | None:
        p = os.fsdecode(p)
        rel = os.path.relpath(p, root_s)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            return None
        parts = rel.split(os.sep)
        if any(is_ignored_dir(x) for x in (parts if is_dir else parts[:-1])):
            return None
        if not is_dir and not parts[-1].endswith(".md"):
            return None
        return rel

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: Any) -> None:
            kind = event.event_type
            # opened/closed events fire when the indexer itself reads notes: reacting would loop.
            if kind not in ("created", "modified", "deleted", "moved"):
                return
            if event.is_directory and kind == "modified":
                return
            paths = [event.src_path] + ([event.dest_path] if kind == "moved" else [])
            # Both ends of a move: the catalog re-reads exactly the paths marked here (see
            # IndexingLoop.refresh_catalog), so the old name must be seen to go and the new one to come.
            for p in paths:
                rel = relevant(p, event.is_directory)
                if rel is not None:
                    mark(rel, event.is_directory)

    return Handler()


class IndexingLoop:
    """Watcher + catch-up loop + snapshot of one server. Requests read :attr:`snap`; the socket
    side reports each request through :meth:`begin_request`/:meth:`end_request` so background
    embedding gives way to queries."""

    def __init__(self, settings: Settings, vault: Vault, stop: threading.Event, *, debounce: float = DEBOUNCE_S,
                 resync: float = RESYNC_S, on_resync: Callable[[], None] = lambda: None) -> None:
        self.settings = settings
        self.vault = vault
        self.debounce = debounce
        self.resync = resync
        self.on_resync = on_resync
        self.log: logging.Logger = logging.getLogger("hive_brain.server")
        self.embedder = BackgroundEmbedder(vault.state)
        self.ready = threading.Event()
        self.cond = threading.Condition()
        self._stop = stop
        self._dirty = True  # the first cycle always catches up
        self._forced = True
        self._last_event = 0.0
        self._started_seq = 0  # catch-up cycles begun
        self._done_seq = 0  # the newest cycle whose result readers can already see
        self._dirty_cycle = 0  # the newest cycle begun with changes the watcher saw
        self.cycles = 0
        self.last_catch_up: dict[str, Any] | None = None
        self.snap: Snapshot | None = None
        self._sem: tuple[Any, Any, str | None] = (None, None, "not loaded yet")
        self.pack_key: str | None = None  # the embedding pack's key as loaded (server.Server checks it)
        self._inflight = 0
        # Notes whose passages the reranker reads ahead of questions, in idle moments (search/rerank.py):
        # a cold second pass over 30 candidates cost 240-400 ms at 2,000 notes, a warm one ~1 ms.
        self._rr_model: Any = None
        self._rr_todo: list[Any] = []
        self._writes: list[WriteJob] = []
        self._okf_gen: int | None = None  # the generation the default OKF bundle was last pruned against
        self._transcripts_at: float | None = None  # monotonic time of the last quiet-transcript scan
        self.observer: Any = None
        self.watcher = "none"
        self.error: str | None = None
        # What the watcher saw since the catalog last read it: path -> the event's number. A folder
        # event (a folder moved in, renamed, deleted) names no notes: the next refresh walks the vault.
        self._event_seq = 0
        self._changed: dict[str, int] = {}
        self._unknown_seq: int | None = 0  # nothing read yet: the first refresh walks
        self._walk_next = False  # the next catch-up walks the vault whatever the watcher saw (catch_up_now)
        # Writes answered before they are indexed (:meth:`defer_publish`): the paths the next cycle names in
        # its generation label, and counts that let a prompt wait for exactly those writes.
        self._written: list[str] = []
        self._write_due: float | None = None  # when the cycle indexing them starts at the latest
        self._writes_acked = 0
        self._writes_in_cycle = 0
        self._writes_indexed = 0
        # path -> the number (``_writes_acked``) of the last answered write to it, until a cycle indexed it:
        # what a read may check instead of waiting (:meth:`settle`'s ``unaffected``).
        self._unindexed: dict[str, int] = {}
        self._kick_when_idle = False  # a read went ahead of them: begin their cycle once no request is in flight
        # What may differ from the snapshot's manifest (`hive-brain status` counts it, :meth:`stale_notes`):
        # the notes the watcher named and the server wrote since the event the snapshot's cycle read
        # after (path -> event number), and whether a folder event (notes unnamed) came since.
        self._touched: dict[str, int] = {}
        self._touched_unknown: int | None = None
        self._read_seq: int | None = None  # the event number the last finished catch-up read after
        # The server's life check (server.Server.check_life): asked before every catch-up, so a vault
        # deleted under the server is not indexed as "every note removed" before the server stops.
        self.alive: Callable[[], str | None] = lambda: None
        self.on_dead: Callable[[str], None] = lambda why: stop.set()

    # -- watcher ---------------------------------------------------------------------------------
    def start_watcher(self) -> None:
        try:
            from watchdog.observers import Observer

            obs = Observer()
            obs.schedule(watch_handler(self.vault.root, self.mark), os.fspath(self.vault.root), recursive=True)
            obs.daemon = True
            obs.start()
            self.observer = obs
            self.mark("", is_dir=True)  # what changed before it watched is unknown: the next refresh walks
            self.watcher = type(obs).__name__
        except Exception as e:  # noqa: BLE001 - e.g. the inotify watch limit: scanning still works, just slower
            self.watcher = "polling"
            self.resync = min(self.resync, POLL_RESYNC_S)
            self.log.warning("no file watcher (%s: %s); scanning the vault every %.0fs instead",
                             type(e).__name__, e, self.resync)

    def stop_watcher(self) -> None:
        if self.observer is not None:
            with contextlib.suppress(Exception):
                self.observer.stop()

    def join_watcher(self) -> None:
        if self.observer is not None:
            with contextlib.suppress(Exception):
                self.observer.join(2.0)

    def mark(self, rel: str, is_dir: bool = False) -> None:
        with self.cond:
            self._event_seq += 1
            if is_dir:
                self._unknown_seq = self._touched_unknown = self._event_seq
            else:
                self._changed[rel] = self._touched[rel] = self._event_seq
            self._dirty = True
            self._last_event = time.monotonic()
            self.cond.notify_all()

    def refresh_catalog(self, catalog: Catalog) -> bool:
        """Bring ``catalog`` up to date for a write (lock held): re-read only the notes the watcher saw
        change, or walk the whole vault when it cannot say (no watcher, a folder event, not read yet).
        The 30 s resync walks anyway, for events a watcher can miss (a full inotify queue, NFS).
        Returns whether it walked; a write that then misses an id walks before saying "not found"."""
        with self.cond:
            seq = self._event_seq
            paths = None if self.observer is None or self._unknown_seq is not None else sorted(self._changed)
        catalog.refresh(only=paths)
        self._forget(seq, paths)
        return paths is None

    def _forget(self, seq: int, paths: list[str] | None) -> None:
        """The catalog has read ``paths`` (None: every note) as they were at event ``seq`` or later;
        events after ``seq`` may not have been seen and stay marked."""
        with self.cond:
            if paths is None:
                self._changed = {p: n for p, n in self._changed.items() if n > seq}
                if self._unknown_seq is not None and self._unknown_seq <= seq:
                    self._unknown_seq = None
            else:
                for p in paths:
                    if self._changed.get(p, seq + 1) <= seq:
                        del self._changed[p]

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    # -- requests --------------------------------------------------------------------------------
    def begin_request(self) -> None:
        with self.cond:
            self._inflight += 1

    def end_request(self) -> None:
        with self.cond:
            self._inflight -= 1
            if not self._inflight:
                if self._kick_when_idle:
                    self._kick_when_idle = False
                    self._forced = self._forced or self._dirty
                self.cond.notify_all()

    def catch_up_now(self, timeout: float) -> dict:
        """Catch up now (no debounce) and wait for it: for scripts that just wrote notes by hand."""
        deadline = time.monotonic() + timeout
        with self.cond:
            # A cycle already running may have scanned before the caller's change: wait for the next.
            target = self._started_seq + 1
            # A script's hand edits may not have reached the watcher yet: this one walks the vault.
            self._dirty = self._forced = self._walk_next = True
            self.cond.notify_all()
            if not self._wait(lambda: self._done_seq >= target, deadline):
                raise LockTimeout(f"catch-up did not finish within {timeout:g}s",
                                  hint="another process may hold the vault lock")
        snap = self.snap
        return {"generation": snap.generation if snap else None, "last": self.last_catch_up}

    def submit_write(self, fn: Callable[[Any], dict], timeout: float) -> dict:
        """Run ``fn(engine)`` on the indexing thread (the process's one index writer, its catalog
        warm) and return its result. A job still queued after ``timeout`` is withdrawn, so it never
        runs after its caller has given up; one already running is waited for (it holds the vault
        lock with its own timeout, so it ends)."""
        job = WriteJob(fn)
        with self.cond:
            self._writes.append(job)
            self.cond.notify_all()
        if not job.done.wait(timeout):
            with self.cond:
                if job in self._writes:
                    self._writes.remove(job)
                    raise LockTimeout(f"the server did not get to this write within {timeout:g}s; nothing was written",
                                      hint="the server is busy; try again, or stop it with `hive-brain serve --stop`")
            job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def defer_publish(self, paths: list[str]) -> None:
        """The server's writes publish here (``MemoryStore.publish``): the notes are durable (renamed,
        journal finished) and the catalog has read them, so the write is answered now and a cycle
        within ``WRITE_INDEX_DELAY_S`` indexes them. Indexing inside the write (a tantivy commit, the
        generation's fsyncs) was most of a one-note write's time; a read that comes meanwhile waits for
        that cycle (:meth:`settle`, :meth:`settle_writes`), so a recall right after the answer finds the note."""
        with self.cond:
            self._event_seq += 1
            for p in paths:
                self._touched[p] = self._event_seq
            self._written.extend(paths)
            self._writes_acked += 1
            for p in paths:
                self._unindexed[p] = self._writes_acked
            self._dirty = True
            self._last_event = now = time.monotonic()
            if self._write_due is None:
                self._write_due = now + WRITE_INDEX_DELAY_S
            self.cond.notify_all()

    def _run_writes(self, eng: Engine) -> None:
        with self.cond:
            jobs, self._writes = self._writes, []
        try:
            for job in jobs:
                try:
                    job.result = job.fn(eng)
                except BaseException as e:  # noqa: BLE001 - handed to the waiting request, which reports it
                    job.error = e
        finally:
            for job in jobs:
                job.done.set()

    # -- the thread ------------------------------------------------------------------------------
    def run(self) -> None:
        from ..engine import Engine

        eng = None
        while not self._stop.is_set():
            try:
                eng = Engine.from_settings(self.settings)
                if self._first_index(eng):
                    break
            except Exception as e:  # noqa: BLE001 - keep retrying; ping reports the error
                self.error = f"{type(e).__name__}: {e}"
                self.log.exception("could not open the index; retrying")
                self._stop.wait(2.0)
        if eng is None or self._stop.is_set():
            return
        eng.memory.refresh_catalog = self.refresh_catalog
        eng.memory.publish = self.defer_publish  # before any agent's store is made: they take it over
        eng.indexer.lexical.defer_merges = True
        try:
            try:
                self._scan_transcripts(eng)  # at start too, not 30 s later: sessions may have ended meanwhile
            except Exception:  # noqa: BLE001 - the loop's cycles try again
                self.log.exception("quiet transcripts failed")
            self._loop(eng)
        finally:
            eng.indexer.lexical.finish_merges()

    def _begin_cycle(self) -> int:
        """Called under the condition: clears the dirty mark (events from now on set it again)."""
        self._started_seq += 1
        if self._dirty:
            self._dirty_cycle = self._started_seq  # this cycle indexes what the watcher saw
        self._dirty = self._forced = False
        self._write_due = None
        self._writes_in_cycle = self._writes_acked
        return self._started_seq

    def settle(self, timeout: float, unaffected: Callable[[list[str]], bool] | None = None) -> bool:
        """Read your own edit: before a read is answered, what the watcher has already seen change is
        indexed (the debounce is skipped, a running catch-up waited for), within ``timeout``. A note
        saved by hand and recalled at once was missed while the watcher's event waited out the
        debounce (issue 28). False when it did not finish in time (the read answers from what is
        indexed: a writer holding the lock only delays the catch-up).

        ``unaffected(paths)``: whether the read's answer is the same with or without these notes, which
        this server wrote and has not indexed yet (``search.pending``). When nothing else is waiting to
        be indexed and it says so, the read does not wait: a recall after a write waited for that
        write's tantivy commit and fsyncs (5.3x ``python -c pass`` at 10k notes) whatever it asked."""
        if unaffected is not None:
            paths = self._only_written()
            if paths and unaffected(paths):
                with self.cond:
                    # Not waited for, but begun once the server has answered its requests rather than after
                    # WRITE_INDEX_DELAY_S: a read says the writes have stopped for now, and a later write that
                    # meets the cycle waits for all of it (cli_latency at 10k, the `remember` after recall
                    # and answer: 87 -> 48 ms p50 with the cycle begun at the read, same rounds, load ~11).
                    # Not at once: the cycle's Python (the diff, the publish: ~30 ms CPU at 10k) would hold the
                    # GIL against this very read.
                    self._kick_when_idle = True
                return True
        deadline = time.monotonic() + timeout
        with self.cond:
            if self._dirty:
                target = self._started_seq + 1
                self._forced = True
                self.cond.notify_all()
            elif self._dirty_cycle > self._done_seq:
                target = self._dirty_cycle
            else:
                return True
            return self._wait(lambda: self._done_seq >= target, deadline)

    def _only_written(self) -> list[str] | None:
        """The notes this server wrote that are not indexed yet, when they are all that is: None when
        the watcher saw anything else change (a hand edit: its words are not known here), a folder
        event or a catch-up that walks the vault is pending, or nothing is waiting."""
        with self.cond:
            if (not self._unindexed or self._unknown_seq is not None or self._walk_next or self.observer is None
                    or not self._changed.keys() <= self._unindexed.keys()):
                return None
            return sorted(self._unindexed)

    def _wait(self, done: Callable[[], bool], deadline: float) -> bool:
        """Under the condition: wait until ``done()``; False at the deadline or when stopping."""
        while not done():
            left = deadline - time.monotonic()
            if left <= 0 or self._stop.is_set():
                return False
            self.cond.wait(left)
        return True

    def _end_cycle(self, seq: int) -> None:
        with self.cond:
            self._done_seq = max(self._done_seq, seq)
            self._writes_indexed = max(self._writes_indexed, self._writes_in_cycle)
            self._unindexed = {p: n for p, n in self._unindexed.items() if n > self._writes_indexed}
            self.cond.notify_all()

    def settle_writes(self, timeout: float) -> bool:
        """Wait (within ``timeout``) until the writes this server has answered are indexed; unlike
        :meth:`settle`, not for what the watcher saw (the prompt hook's deadline is short)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            target = self._writes_acked
            if self._writes_indexed < target and self._dirty:
                self._forced = True  # not yet begun: no waiting out WRITE_INDEX_DELAY_S
                self.cond.notify_all()
            return self._wait(lambda: self._writes_indexed >= target, deadline)

    def _first_index(self, eng: Engine) -> bool:
        t0, c0 = time.monotonic(), time.process_time()
        idx = eng.indexer
        if idx.pack_dir is not None:
            # What the vectors and the second model need, on a thread of its own while the catch-up and
            # e5's loading run, instead of after them: lancedb's import (~0.6 CPU-s, mostly Python) and
            # the reranker's sessions (native, the GIL released for most of it). A failure here is met
            # again, and reported, where they are used.
            threading.Thread(target=_preload, args=(idx.pack_dir,), name="preload", daemon=True).start()
        with self.cond:
            seq = self._begin_cycle()
        res = self._catch_up(idx, lock_timeout=2.0, label="serve: start", walk=True)
        while res is None and idx.gens.current_id() is None:
            # No index at all and someone else holds the lock (a rebuild?): nothing to serve yet.
            if self._stop.wait(0.5):
                return False
            res = self._catch_up(idx, lock_timeout=5.0, label="serve: start", walk=True)
        if res is None:
            with self.cond:
                self._dirty = self._forced = True
        # Each phase's wall and process CPU time, so a slow start says where it went on a loaded machine
        # too (issue 26: ready <= 5 s at 1k notes).
        phases: list[tuple[str, float, float]] = []
        mark = [t0, c0]

        def phase(name: str) -> None:
            now = (time.monotonic(), time.process_time())
            phases.append((name, now[0] - mark[0], now[1] - mark[1]))
            mark[:] = now

        phase("catch-up")
        self._load_semantic(idx)
        phase("models")
        self._refresh(idx)
        if res is not None:
            self._end_cycle(seq)
        self._plan_rerank_warm(idx)
        phase("snapshot")
        snap = self.snap
        assert snap is not None
        self._warm_read(idx, snap)
        phase("warm read")
        self.error = None
        from ..rpc.client import READY_NAME
        from ..store.fsutil import atomic_write_text

        # Logged before the marker and the event: whoever waited on them reads a log that says why
        # (the test that checks the phases read the log a moment before this line and failed in CI).
        self.log.info("ready in %.2fs, %.2f CPU-s (%s): generation %s, semantic %s, watcher %s", time.monotonic() - t0,
                      time.process_time() - c0, ", ".join(f"{k} {w:.2f}s/{c:.2f} CPU-s" for k, w, c in phases), snap.generation,
                      "on" if snap.embedder is not None else f"off ({snap.semantic_off})", self.watcher)
        with contextlib.suppress(OSError):
            # Our pid in it (rpc/wire.ready): a marker that outlives a kill -9 is not believed. Before
            # the event: whoever waited on it may read at once.
            atomic_write_text(self.vault.state / READY_NAME, f"{os.getpid()}\n", durable=False)
        self.ready.set()
        return True

    def _warm_read(self, idx: Indexer, snap: Snapshot) -> None:
        """One prompt answered before ``ready`` (nothing logged): the read path's imports, first
        searches and first model runs are paid here. Without it the first prompt after a start paid
        them and timed out at the hook's 1.5 s deadline with nothing injected (measured)."""
        from ..search.prompt import contextual_answer
        from ..search.recall import search
        from ..search.view import assemble

        view = assemble(lexical=snap.lexical, catalog=idx.catalog, generation=snap.generation, vectors=snap.vectors,
                        embedder=snap.embedder, off_reason=snap.semantic_off, pending=snap.pending,
                        warnings=snap.warnings)
        from .sockets import PROMPT_RERANK_COLD

        try:
            # As the first prompt is answered (the prompt op's bound on cold passages): its model runs and
            # code paths are paid here, not the second model's vectors of every candidate of a made-up
            # question (the read-ahead after ``ready`` computes those).
            contextual_answer(lambda q, **o: search(view, q, agent=None, rerank_cold=PROMPT_RERANK_COLD, **o),
                              "how do we deploy the web app?", budget=2000)
        except Exception:  # noqa: BLE001 - a failure here is met again, and reported, by the first request
            self.log.exception("warming the read path failed")

    def _load_semantic(self, idx: Indexer) -> None:
        self.pack_key = idx.pack_key
        if idx.pack_dir is None:
            from ..search.view import NO_PACK

            self._sem = (None, None, NO_PACK if self.settings.semantic else "disabled")
            return
        try:
            vectors, embedder = idx.vectors, idx.embedder
            assert vectors is not None and embedder is not None  # there is a pack (pack_dir)
            vectors.enable_memory_cache()  # warm exact search: a masked matrix product, not a LanceDB scan
            embedder.enable_single_session()  # questions: see Embedder.enable_single_session
            embedder.embed_queries(["warm up"])  # the first run of an ONNX session pays for allocation
            from ..search.candidates import background_tokens, background_vectors
            from ..search.params import PARAMS

            # The abstention's background sentences are embedded once per process, on first use: here,
            # before `ready`, not in the first prompt's request (8.5 s on a loaded machine, measured).
            background_vectors(embedder)
            if PARAMS["late_abstain"] and hasattr(embedder, "token_vectors"):
                background_tokens(embedder)
            self._sem = (vectors, embedder, None)
            self._warm_vectors()
        except Exception as e:  # noqa: BLE001 - a broken pack means lexical search, reported in results
            self.log.exception("embedding pack unusable; semantic search is off")
            self._sem = (None, None, f"embedding pack unusable: {type(e).__name__}: {e}")

    def release_batch_sessions(self) -> bool:
        """Release the embedder's and the reranker's batch sessions (idle: see server.BATCH_IDLE_S);
        True if any was released."""
        released = False
        for model in (self._sem[1], self._rr_model):
            if model is not None and hasattr(model, "release_batch_session"):
                released = bool(model.release_batch_session()) or released
        if released:
            self.log.info("idle: the models' batch sessions released (loaded again for the next batch)")
        return released

    @property
    def rerank_ahead(self) -> int:
        return len(self._rr_todo)

    @property
    def reranker_on(self) -> bool:
        return self._rr_model is not None

    def _plan_rerank_warm(self, idx: Indexer) -> None:
        from ..search import rerank

        self._rr_model = rerank.model_for(self._sem[1]) if self._sem[1] is not None else None
        if self._rr_model is not None:
            self._rr_model.enable_single_session()
        # Coverage's word sets are read ahead with or without a second model: a lexical server (semantic
        # off, no pack) analysed each question's candidate passages itself, ~4 of a 10k recall's 15 ms CPU.
        self._rr_todo = rerank.warm_order(idx.catalog)

    def _rerank_warm(self, idx: Indexer) -> None:
        from ..search import features, rerank

        t_end = time.monotonic() + RERANK_SLICE_S
        try:
            # _inflight is read without the condition: a stale read costs one more short step.
            while self._rr_todo and not self._inflight and time.monotonic() < t_end:
                batch, self._rr_todo = self._rr_todo[:RERANK_WARM_STEP], self._rr_todo[RERANK_WARM_STEP:]
                if self._rr_model is not None:
                    rerank.warm(self._rr_model, idx.lexical, batch, store=idx.embcache)
                features.warm_terms(idx.lexical, batch)  # coverage's word sets: a quarter of a 10k prompt op
        except Exception:  # noqa: BLE001 - questions still compute what they need; stop reading ahead
            self.log.exception("reading ahead for the reranker failed; it computes on demand")
            self._rr_todo = []
        if not self._rr_todo:
            self.log.info("passages read ahead (%s)", "coverage and the second model" if self._rr_model else "coverage")

    def _catch_up(self, idx: Indexer, *, lock_timeout: float, label: str, walk: bool = False) -> dict | None:
        """Index what changed, under the vault lock: the notes the watcher saw change and the server's
        own writes (the catalog read those as they were written: the diff against the current
        generation finds them) or, with ``walk``, after a folder event, without a watcher, or when
        asked to (:meth:`catch_up_now`), whatever a stat walk of the vault finds. A one-note catch-up
        walked all 10k notes before (~0.1 s), after every write and every saved edit."""
        from ..index.indexer import write_label
        from ..store.journal import write_session

        why = self.alive()
        if why:
            self.on_dead(why)
            return None
        with self.cond:
            seq = self._event_seq  # the catch-up reads after this: it sees these events' notes
            walk = walk or self._walk_next or self.observer is None or self._unknown_seq is not None
            paths = None if walk else sorted(self._changed)
            written, self._written, self._walk_next = self._written, [], False
        try:
            with write_session(self.vault, timeout=lock_timeout, command="serve") as recovered:
                if recovered:
                    paths = None  # a transaction rolled forward or back: its notes' events may come later
                res = idx.catch_up(changed=paths, label=write_label(list(dict.fromkeys(written))) if written else label)
                self._prune_export(idx, res)
        except LockTimeout:
            with self.cond:  # for the next try
                self._written[:0] = written
                self._walk_next = self._walk_next or walk
            return None
        self._forget(seq, paths)
        self._read_seq = seq
        if recovered:
            self.log.info("recovered unfinished transactions: %s", recovered)
        if res.get("changed") and not written:  # the server's own writes are not news
            self.log.info("catch-up: %s notes indexed, %s removed -> generation %s in %.3fs", res.get("indexed"),
                          res.get("removed"), res.get("generation"), res.get("seconds", 0.0))
        with self.cond:
            self.cycles += 1
            self.last_catch_up = {**res, "at": time.time()}
        return res

    def _prune_export(self, idx: Indexer, res: dict) -> None:
        """Keep the default OKF bundle current: a note deleted, archived or superseded leaves it at once.
        Keyed on the generation, not on this catch-up's own changes: a write through the server or a CLI
        write publishes its generation itself, and the catch-up that follows finds nothing new to index.
        The lock is held (the catch-up's), so an `okf export` cannot interleave."""
        gen = res.get("generation")
        if gen is None or gen == self._okf_gen:
            return
        from ..memory.okf import prune_default

        try:
            gone = prune_default(self.vault, idx.catalog)
        except Exception:  # noqa: BLE001 - a bundle we cannot tidy must not stop indexing; retried next generation
            self.log.exception("could not prune the OKF export")
            return
        self._okf_gen = gen
        if gone:
            self.log.info("OKF export: removed %d concepts whose note is gone, archived or superseded", len(gone))

    def _refresh(self, idx: Indexer) -> None:
        gid = idx.gens.current_id()
        warnings = tuple(dict.fromkeys(idx.gens.warnings))
        idx.gens.warnings.clear()  # current_id() appends on every call; keep only this round's
        idx.lexical.reload()  # another process may have committed (a CLI write)
        vectors, embedder, off = self._sem
        self._warm_vectors()
        pending = idx.pending_count() if vectors is not None else 0
        read, self._read_seq = self._read_seq, None
        # Taken here, off the request path: a request thread's own generation store re-materialised the
        # manifest for every new generation, and diffed all of it with the catalog (10k notes: ~25 ms).
        manifest = idx.gens.manifest(gid) if read is not None and gid is not None else None
        with self.cond:
            self.snap = Snapshot(generation=gid, lexical=idx.lexical, vectors=vectors, embedder=embedder,
                                 semantic_off=off, warnings=warnings, pending=pending, manifest=manifest)
            if read is not None:
                self._touched = {p: n for p, n in self._touched.items() if n > read}
                if self._touched_unknown is not None and self._touched_unknown <= read:
                    self._touched_unknown = None

    def stale_notes(self, catalog: Catalog, generation: int | None) -> int | None:
        """How many notes differ from the index (``hive-brain status``'s staleNotes) when ``generation``
        is the snapshot's: only the notes touched since its cycle read the vault are compared with its
        manifest. None when that is not known here (no watcher, a folder event since, the first
        catch-up could not run, another process published a generation since): the caller diffs all."""
        from ..index.indexer import indexable

        with self.cond:
            snap = self.snap
            if (snap is None or snap.manifest is None or snap.generation != generation or self.observer is None
                    or self._touched_unknown is not None):
                return None
            paths = sorted(self._touched)
        now = catalog.by_paths(paths, with_meta=False)
        man = snap.manifest
        stale = 0
        for p in paths:
            e = now.get(p)
            sha = e.sha if e is not None and indexable(p, e.sha, e.kind) else None
            stale += sha != man.get(p)
        return stale

    def _warm_vectors(self) -> None:
        """The search's in-memory copy of the vectors reloaded here, after a write, not by the next
        request (at 10k passages the reload is a full table read)."""
        vectors = self._sem[0]
        if vectors is not None:
            try:
                vectors.warm()
            except Exception:  # noqa: BLE001 - damage is handled by the request that meets it
                self.log.exception("could not reload the vectors' in-memory copy")

    def _scan_transcripts(self, eng: Engine) -> None:
        now = time.monotonic()
        if self._transcripts_at is not None and now - self._transcripts_at < TRANSCRIPT_SCAN_S:
            return
        self._transcripts_at = now
        if transcript_pass(eng, float(self.settings.transcript_quiet or 0.0), self.log):
            with self.cond:  # the notes written: indexed by the next cycle, whatever the watcher saw
                self._dirty = True
                self._last_event = time.monotonic()
                self.cond.notify_all()

    def _next_action(self, next_resync: float) -> tuple[str, int]:
        """Wait (under the condition) for the next thing to do: ("catch-up" | "resync", cycle) or
        ("embed" | "compact", 0); ("", 0) once stopping."""
        emb = self.embedder
        with self.cond:
            while not self._stop.is_set():
                now = time.monotonic()
                if self._writes:
                    return "write", 0
                if self._dirty:
                    quiet = now - self._last_event
                    due = self._write_due if self._write_due is not None else now + self.debounce
                    if self._forced or quiet >= self.debounce or now >= due:
                        late = now - min(due, self._last_event + self.debounce)
                        if self._forced or not self._inflight or late >= CYCLE_YIELD_MAX_S:
                            return "catch-up", self._begin_cycle()
                        # Nobody waits for this cycle, and a request is being answered: its Python would
                        # share the GIL with the request (a recall right after a write, cli_latency). The
                        # request's end wakes us; a steady stream of them delays indexing only so long.
                        self.cond.wait(CYCLE_YIELD_MAX_S - late)
                        continue
                    self.cond.wait(min(self.debounce - quiet, due - now))
                    continue
                if now >= next_resync:
                    return "resync", self._begin_cycle()
                snap = self.snap
                pending = snap.pending if snap is not None and snap.vectors is not None else 0
                if snap is not None and snap.vectors is not None:
                    action = emb.next_action(pending, now, busy=bool(self._inflight))
                    if action:
                        return action, 0
                if self._rr_todo and not self._inflight:
                    return "rerank-warm", 0
                wake = min(next_resync, emb.wake_at(pending, now) or next_resync)
                self.cond.wait(max(0.01, wake - now))
        return "", 0

    def _apply_pending_writes(self, eng: Engine) -> None:
        """Writes a CLI left pending (it could not get the lock in time) are applied here too, so they
        do not wait for the next CLI write; the vault being busy again simply leaves them queued."""
        from ..errors import LockTimeout
        from ..store.pending import has_queued

        if not has_queued(eng.vault.state):
            return
        try:
            eng.memory.apply_pending(timeout=0.5)
        except LockTimeout:
            pass

    def _loop(self, eng: Engine) -> None:
        idx = eng.indexer
        emb = self.embedder
        next_resync = time.monotonic() + self.resync
        while not self._stop.is_set():
            action, seq = self._next_action(next_resync)
            if not action:
                break
            try:
                if action == "write":
                    self._run_writes(eng)
                    continue
                if action == "embed":
                    pending = emb.slice(idx)
                    self._warm_vectors()
                    snap = self.snap
                    if pending is not None and snap is not None:
                        self.snap = dataclasses.replace(snap, pending=pending)
                    continue
                if action == "compact":
                    emb.compact(idx)
                    self._warm_vectors()
                    continue
                if action == "rerank-warm":
                    self._rerank_warm(idx)
                    continue
                if action == "resync":
                    next_resync = time.monotonic() + self.resync
                    self.on_resync()
                res = self._catch_up(idx, lock_timeout=0.5 if action == "catch-up" else 0.05, label=f"serve: {action}",
                                     walk=action == "resync")
                if res is None:
                    # A CLI writer holds the lock; it publishes its own change, but a hand edit may
                    # be waiting too, so come back shortly.
                    with self.cond:
                        self._dirty = True
                        self._last_event = time.monotonic()
                    continue
                if res.get("changed"):
                    emb.index_changed()
                self._apply_pending_writes(eng)
                if promotion_pass(eng, self.settings.promotion_every_s, self.log):
                    emb.index_changed()
                self._scan_transcripts(eng)
                self._refresh(idx)
                self._end_cycle(seq)
            except Exception:  # noqa: BLE001 - the server outlives one bad cycle; the next scan retries
                self.log.exception("%s failed", action)
                with self.cond:
                    self._dirty = True
                    self._last_event = time.monotonic() + 1.0
            finally:
                idx.lexical.finish_merges()  # after the cycle's readers got their snapshot


def _preload(pack_dir: Any) -> None:
    from types import SimpleNamespace

    from ..index.vectors import import_lancedb
    from ..search import rerank

    with contextlib.suppress(Exception):
        import_lancedb()
        model = rerank.model_for(SimpleNamespace(pack_dir=pack_dir))  # get_embedder keeps it for the server
        if model is not None:
            model.enable_single_session()
