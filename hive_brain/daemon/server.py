"""``hive-brain serve``: one long-running process per vault that keeps the index current and answers
recalls warm.

Threads and who owns what:

* **indexer thread** — the only index writer of this process. It owns the writing :class:`Engine`
  (its catalog and pending-queue SQLite connections are bound to the thread that opened them). It
  waits for the vault watcher, debounces, catches up under the vault lock with a short timeout (a CLI
  writer holding the lock only delays it), publishes an immutable :class:`_Snapshot` for readers,
  and embeds pending passages in slices of about ``EMBED_SLICE_S`` so a new edit never waits behind a
  long embedding run. Slices only fill the embedding cache; the vector table is written in upserts
  of up to ``FLUSH_ROWS`` rows and compacted now and then (see ``FLUSH_ROWS`` for why). It does not
  start a slice while a request is being answered: queries share the ONNX session and the cores.
* **watchdog observer** — turns file events under the vault into "dirty" marks; it never indexes.
* **accept thread + worker pool** — answers requests (see :mod:`hive_brain.client` for the protocol).
  Reads never take the vault lock: each request builds a :class:`~hive_brain.recall.View` from the
  current snapshot (tantivy, LanceDB and the ONNX session are safe to share across threads) plus a
  per-worker catalog connection (SQLite connections are not).

One server per vault is enforced by an ``flock`` on ``<state>/server.lock``, held for the life of the
process: the OS drops it on any death, even ``kill -9``, so a stale ``server.json`` or socket never
blocks the next start (the next server removes them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings, validate_agent_id
from ..errors import HiveBrainError, LockTimeout, Refused, UsageError
from ..rpc.client import (
    INFO_NAME,
    LOCK_NAME,
    LOG_NAME,
    MAX_LINE,
    ServerNotReady,
    ServerUnavailable,
    call,
    fallback_socket_dir,
    read_info,
    socket_path,
)

DEBOUNCE_S = 0.3  # editors write a note in bursts (temp file, rename, metadata); index once it is quiet
RESYNC_S = 30.0  # full stat scan as a safety net for events the watcher missed (queue overflow, NFS)
POLL_RESYNC_S = 2.0  # the scan interval when no file watcher could be started
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
LOG_MAX_BYTES = 4 * 1024 * 1024
LOG_KEEP_BYTES = 512 * 1024
WORKERS = 16
IDLE_CONNECTION_S = 60.0
RECALL_OPTIONS = frozenset({"scope", "types", "tags", "project", "limit", "as_of", "include_operational", "detail",
                            "mode", "abstain", "drop_ratio", "pool"})


class AlreadyRunning(Refused):
    """A server already serves this vault."""


@dataclass(frozen=True)
class _Snapshot:
    """What readers see; replaced as a whole by the indexer thread, never mutated."""

    generation: int | None
    lexical: Any
    vectors: Any
    embedder: Any
    semantic_off: str | None
    warnings: tuple[str, ...] = ()
    pending: int = 0


# ---------------------------------------------------------------------------------------------- pid lock
class PidLock:
    """``flock`` on ``<state>/server.lock`` holding the owner's pid as text (for "already running")."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def holder(self) -> int | None:
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None


def server_running(state_dir: Path) -> bool:
    """True while some process holds the server lock of this state dir (works across zombies too)."""
    lock = PidLock(Path(state_dir) / LOCK_NAME)
    if not lock.path.exists():
        return False
    if lock.acquire():
        lock.release()
        return False
    return True


def _remove_stale(state_dir: Path, sock: Path) -> None:
    """Called only while holding the server lock, so nothing live can own these files."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(sock).st_mode):
            os.unlink(sock)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state_dir / INFO_NAME)


def _prepare_socket_dir(sock: Path, state_dir: Path) -> None:
    if sock.parent == state_dir:
        state_dir.mkdir(parents=True, exist_ok=True)
        return
    d = fallback_socket_dir()
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o700)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise HiveBrainError(f"{d} is not a directory owned by you; refusing to put the server socket there",
                             hint=f"remove {d}, or use a shorter HIVE_BRAIN_STATE_DIR")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)


# ---------------------------------------------------------------------------------------------- logging
def _trim_log(path: Path) -> None:
    """Keep the log under LOG_MAX_BYTES; every writer appends (O_APPEND), so truncating is safe."""
    try:
        size = path.stat().st_size
        if size <= LOG_MAX_BYTES:
            return
        with open(path, "rb") as f:
            f.seek(size - LOG_KEEP_BYTES)
            tail = f.read()
        tail = tail[tail.find(b"\n") + 1:]
        with open(path, "r+b") as f:
            f.truncate(0)
        with open(path, "ab") as f:
            f.write(b"[log trimmed]\n" + tail)
    except OSError:
        pass


def _make_logger(path: Path, to_stderr: bool, name: str) -> logging.Logger:
    log = logging.getLogger(name)
    log.setLevel(logging.INFO)
    log.propagate = False
    fmt = logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s")
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = logging.FileHandler(path, mode="a", encoding="utf-8")
    fh.setFormatter(fmt)
    log.addHandler(fh)
    if to_stderr:
        sh = logging.StreamHandler()
        sh.setFormatter(fmt)
        log.addHandler(sh)
    return log


# ---------------------------------------------------------------------------------------------- watcher
def _watch_handler(root: Path, mark: Callable[[str], None]):
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
            for p in paths:
                rel = relevant(p, event.is_directory)
                if rel is not None:
                    mark(rel)
                    return

    return Handler()


# ---------------------------------------------------------------------------------------------- server
class Server:
    """The server of one vault. Usable in-process (tests, benchmarks) as a context manager::

        with Server(settings) as srv:
            srv.wait_ready(10)
            client.call(srv.state, "recall", {"query": "..."}, timeout=2)
    """

    def __init__(self, settings: Settings, *, debounce: float = DEBOUNCE_S, resync: float = RESYNC_S,
                 log_to_stderr: bool | None = None) -> None:
        from ..store.vault import open_vault

        self.settings = settings
        self.vault = open_vault(settings)
        self.state = self.vault.state
        self.socket = socket_path(self.state)
        self.log_path = self.state / LOG_NAME
        self.debounce = debounce
        self.resync = resync
        self._log_to_stderr = log_to_stderr
        self.log: logging.Logger = logging.getLogger("hive_brain.server")
        self._pidlock = PidLock(self.state / LOCK_NAME)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._cond = threading.Condition()
        self._dirty = True  # the first cycle always catches up
        self._forced = True
        self._last_event = 0.0
        self._started_seq = 0  # catch-up cycles begun
        self._done_seq = 0  # the newest cycle whose result readers can already see
        self._cycles = 0
        self._last_catch_up: dict[str, Any] | None = None
        self._snap: _Snapshot | None = None
        self._sem: tuple[Any, Any, str | None] = (None, None, "not loaded yet")
        self._chunk = 4
        self._embed_after = 0.0
        self._todo: list[tuple[str, str]] | None = None  # (text hash, text) still to embed before the next flush
        self._plain_embed = False
        self._vec_writes = 0
        self._compacted_at = 0.0
        self.compact_after = COMPACT_AFTER_WRITES
        self._inflight = 0
        self._conns: set[socket.socket] = set()
        self._tls = threading.local()
        self._listener: socket.socket | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._observer: Any = None
        self.watcher = "none"
        self.started_at: float | None = None
        self.error: str | None = None
        self.stats = {"requests": 0, "errors": 0}
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Server:
        self.state.mkdir(parents=True, exist_ok=True)
        if not self._pidlock.acquire():
            pid = self._pidlock.holder() or (read_info(self.state) or {}).get("pid")
            raise AlreadyRunning(f"hive-brain serve is already running (pid {pid}) for {self.vault.root}",
                                 hint="stop it with `hive-brain serve --stop`")
        try:
            _trim_log(self.log_path)
            to_stderr = self._log_to_stderr
            if to_stderr is None:
                to_stderr = os.isatty(2)
            self.log = _make_logger(self.log_path, to_stderr, f"hive_brain.server.{id(self):x}")
            self.started_at = time.time()
            _prepare_socket_dir(self.socket, self.state)
            _remove_stale(self.state, self.socket)
            self._listen()
            self._start_watcher()
            self._spawn(self._indexer_main, "hive-brain-indexer")
            self._write_info()
            self.log.info("serving %s (state %s) on %s", self.vault.root, self.state, self.socket)
        except BaseException:
            self.close()
            raise
        return self

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _listen(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.fspath(self.socket))
        os.chmod(self.socket, 0o600)
        s.listen(128)
        s.settimeout(0.25)  # lets the accept loop notice a stop
        self._listener = s
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="hive-brain-req")
        self._spawn(self._accept_loop, "hive-brain-accept")

    def _write_info(self) -> None:
        from ..store.fsutil import atomic_write_text

        info = {"pid": os.getpid(), "socket": str(self.socket), "vault": str(self.vault.root),
                "state_dir": str(self.state), "log": str(self.log_path),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started_at)),
                "started_ts": self.started_at}
        atomic_write_text(self.state / INFO_NAME, json.dumps(info, indent=2) + "\n")

    def _start_watcher(self) -> None:
        try:
            from watchdog.observers import Observer

            obs = Observer()
            obs.schedule(_watch_handler(self.vault.root, self._mark), os.fspath(self.vault.root), recursive=True)
            obs.daemon = True
            obs.start()
            self._observer = obs
            self.watcher = type(obs).__name__
        except Exception as e:  # noqa: BLE001 - e.g. the inotify watch limit: scanning still works, just slower
            self.watcher = "polling"
            self.resync = min(self.resync, POLL_RESYNC_S)
            self.log.warning("no file watcher (%s: %s); scanning the vault every %.0fs instead",
                             type(e).__name__, e, self.resync)

    def _mark(self, rel: str) -> None:
        with self._cond:
            self._dirty = True
            self._last_event = time.monotonic()
            self._cond.notify_all()

    def request_stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested (op ``stop``, a signal, :meth:`request_stop`)."""
        return self._stop.wait(timeout)

    def wait_ready(self, timeout: float) -> bool:
        return self._ready.wait(timeout)

    def close(self, join_timeout: float = 10.0) -> None:
        if self._closed:
            return
        self._closed = True
        self.request_stop()
        if self._observer is not None:
            with contextlib.suppress(Exception):
                self._observer.stop()
        for t in self._threads:
            if t.name == "hive-brain-accept":
                t.join(2.0)
        if self._listener is not None:
            self._listener.close()
        with self._cond:
            conns = list(self._conns)
        for c in conns:  # wake workers blocked reading an idle connection, so the process can exit
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        # Socket and server.json go first: once they are gone no client tries us, even while the
        # indexer finishes its current step below.
        if self._pidlock.fd is not None:
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.lstat(self.socket).st_mode):
                    os.unlink(self.socket)
            info = read_info(self.state)
            if info and info.get("pid") == os.getpid():
                with contextlib.suppress(OSError):
                    os.unlink(self.state / INFO_NAME)
        deadline = time.monotonic() + join_timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self._observer is not None:
            with contextlib.suppress(Exception):
                self._observer.join(2.0)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._pidlock.fd is not None:
            self.log.info("stopped")
        for h in list(self.log.handlers):
            self.log.removeHandler(h)
            h.close()
        self._pidlock.release()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- indexer thread --------------------------------------------------------------------------
    def _indexer_main(self) -> None:
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
        self._loop(eng)

    def _begin_cycle(self) -> int:
        """Called under the condition: clears the dirty mark (events from now on set it again)."""
        self._dirty = self._forced = False
        self._started_seq += 1
        return self._started_seq

    def _end_cycle(self, seq: int) -> None:
        with self._cond:
            self._done_seq = max(self._done_seq, seq)
            self._cond.notify_all()

    def _first_index(self, eng: Any) -> bool:
        t0 = time.monotonic()
        idx = eng.indexer
        with self._cond:
            seq = self._begin_cycle()
        res = self._catch_up(idx, lock_timeout=2.0, label="serve: start")
        while res is None and idx.gens.current_id() is None:
            # No index at all and someone else holds the lock (a rebuild?): nothing to serve yet.
            if self._stop.wait(0.5):
                return False
            res = self._catch_up(idx, lock_timeout=5.0, label="serve: start")
        if res is None:
            with self._cond:
                self._dirty = self._forced = True
        self._load_semantic(idx)
        self._refresh(idx)
        if res is not None:
            self._end_cycle(seq)
        snap = self._snap
        assert snap is not None
        with contextlib.suppress(Exception):
            snap.lexical.search("warm up", limit=1)
        self.error = None
        self._ready.set()
        self.log.info("ready in %.2fs: generation %s, semantic %s, watcher %s", time.monotonic() - t0,
                      snap.generation, "on" if snap.embedder is not None else f"off ({snap.semantic_off})", self.watcher)
        return True

    def _load_semantic(self, idx: Any) -> None:
        if idx.pack_dir is None:
            off = "no embedding pack installed (run `hive-brain model install`)" if self.settings.semantic else "disabled"
            self._sem = (None, None, off)
            return
        try:
            vectors, embedder = idx.vectors, idx.embedder
            vectors.enable_memory_cache()  # warm exact search: a masked matrix product, not a LanceDB scan
            embedder.embed_queries(["warm up"])  # the first run of an ONNX session pays for allocation
            self._sem = (vectors, embedder, None)
        except Exception as e:  # noqa: BLE001 - a broken pack means lexical search, reported in results
            self.log.exception("embedding pack unusable; semantic search is off")
            self._sem = (None, None, f"embedding pack unusable: {type(e).__name__}: {e}")

    def _catch_up(self, idx: Any, *, lock_timeout: float, label: str) -> dict | None:
        from ..store.journal import write_session

        try:
            with write_session(self.vault, timeout=lock_timeout, command="serve") as recovered:
                res = idx.catch_up(label=label)
        except LockTimeout:
            return None
        if recovered:
            self.log.info("recovered unfinished transactions: %s", recovered)
        if res.get("changed"):
            self.log.info("catch-up: %s notes indexed, %s removed -> generation %s in %.3fs", res.get("indexed"),
                          res.get("removed"), res.get("generation"), res.get("seconds", 0.0))
        with self._cond:
            self._cycles += 1
            self._last_catch_up = {**res, "at": time.time()}
        return res

    def _refresh(self, idx: Any) -> None:
        gid = idx.gens.current_id()
        warnings = tuple(dict.fromkeys(idx.gens.warnings))
        idx.gens.warnings.clear()  # current_id() appends on every call; keep only this round's
        idx.lexical.reload()  # another process may have committed (a CLI write)
        vectors, embedder, off = self._sem
        pending = idx.pending_count() if vectors is not None else 0
        self._snap = _Snapshot(generation=gid, lexical=idx.lexical, vectors=vectors, embedder=embedder,
                               semantic_off=off, warnings=warnings, pending=pending)

    def _loop(self, eng: Any) -> None:
        idx = eng.indexer
        next_resync = time.monotonic() + self.resync
        while not self._stop.is_set():
            action = ""
            seq = 0
            with self._cond:
                while not self._stop.is_set():
                    now = time.monotonic()
                    if self._dirty:
                        quiet = now - self._last_event
                        if self._forced or quiet >= self.debounce:
                            seq = self._begin_cycle()
                            action = "catch-up"
                            break
                        self._cond.wait(self.debounce - quiet)
                        continue
                    if now >= next_resync:
                        seq = self._begin_cycle()
                        action = "resync"
                        break
                    snap = self._snap
                    semantic = snap is not None and snap.vectors is not None
                    # Requests first: a query embedding shares the ONNX session (and 2 cores) with us.
                    if semantic and snap.pending > 0 and now >= self._embed_after and not self._inflight:
                        action = "embed"
                        break
                    if (semantic and not snap.pending and self._vec_writes >= self.compact_after
                            and now - self._compacted_at >= COMPACT_MIN_INTERVAL_S):
                        action = "compact"
                        break
                    wake = next_resync
                    if semantic and snap.pending:
                        wake = min(wake, max(self._embed_after, now + 0.02))
                    self._cond.wait(max(0.01, wake - now))
            if not action:
                break
            try:
                if action == "embed":
                    self._embed_slice(idx)
                    continue
                if action == "compact":
                    self._compact(idx)
                    continue
                if action == "resync":
                    next_resync = time.monotonic() + self.resync
                    _trim_log(self.log_path)
                res = self._catch_up(idx, lock_timeout=0.5 if action == "catch-up" else 0.05, label=f"serve: {action}")
                if res is None:
                    # A CLI writer holds the lock; it publishes its own change, but a hand edit may
                    # be waiting too, so come back shortly.
                    with self._cond:
                        self._dirty = True
                        self._last_event = time.monotonic()
                    continue
                if res.get("changed"):
                    self._vec_writes += 1
                    self._todo = None  # the pending queue changed under the prewarm list
                self._refresh(idx)
                self._end_cycle(seq)
            except Exception:  # noqa: BLE001 - the server outlives one bad cycle; the next scan retries
                self.log.exception("%s failed", action)
                with self._cond:
                    self._dirty = True
                    self._last_event = time.monotonic() + 1.0

    def _embed_slice(self, idx: Any) -> None:
        """One short step of background embedding: fill the cache for the next FLUSH_ROWS pending
        passages a few at a time, then write them to the vector table in one upsert."""
        try:
            if self._todo is None and not self._plain_embed:
                self._todo = self._uncached(idx)
                self._plain_embed = self._todo is None
            if self._plain_embed:  # cannot read the queue ourselves: small plain steps instead
                res = idx.embed_pending(chunk=MAX_CHUNK, max_seconds=0.0, lock_timeout=1.0)
                self._vec_writes += 1
            elif self._todo:
                batch, self._todo = self._todo[: self._chunk], self._todo[self._chunk:]
                from ..index.embcache import embed_with_cache

                t0 = time.monotonic()
                embed_with_cache(idx.embedder, idx.embcache, dict(batch))
                per = (time.monotonic() - t0) / len(batch)
                self._chunk = max(1, min(MAX_CHUNK, int(EMBED_SLICE_S / max(per, 1e-4))))
                return
            else:
                # Every row of the next flush is cached: embed_pending only reads the cache and upserts.
                res = idx.embed_pending(chunk=FLUSH_ROWS, max_seconds=0.0, lock_timeout=1.0)
                self._todo = None
                self._vec_writes += 1
        except LockTimeout:
            self._embed_after = time.monotonic() + 0.5
            return
        except Exception:  # noqa: BLE001 - a failing model must not spin; retry much later
            self.log.exception("embedding failed; retrying in 60s")
            self._todo = None
            self._embed_after = time.monotonic() + 60.0
            return
        snap = self._snap
        if snap is not None:
            self._snap = dataclasses.replace(snap, pending=int(res.get("pending") or 0))
        if not res.get("pending"):
            self.log.info("all passages embedded")

    def _uncached(self, idx: Any) -> list[tuple[str, str]] | None:
        """(hash, text) of the next FLUSH_ROWS queued passages the cache lacks, or None when the
        queue cannot be read (embedding then falls back to plain small steps)."""
        import sqlite3

        try:
            return idx.uncached_pending(FLUSH_ROWS)
        except (sqlite3.Error, ValueError, KeyError, TypeError) as e:
            self.log.warning("cannot read the pending queue (%s: %s); embedding in plain steps", type(e).__name__, e)
            return None

    def _compact(self, idx: Any) -> None:
        """Merge the small fragments left by edits and flushes (LanceDB optimize), under the lock."""
        from ..store.lock import vault_lock

        t0 = time.monotonic()
        try:
            with vault_lock(self.state, timeout=0.5, command="serve: compact vectors"):
                idx.vectors.optimize()
        except LockTimeout:
            self._compacted_at = time.monotonic() - COMPACT_MIN_INTERVAL_S + 5.0  # try again in 5 s
            return
        except Exception:  # noqa: BLE001 - compaction is an optimisation; searching still works
            self.log.exception("vector compaction failed")
        self._vec_writes = 0
        self._compacted_at = time.monotonic()
        self.log.info("compacted the vector table in %.2fs", time.monotonic() - t0)

    # -- requests ---------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._listener is not None and self._pool is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    break
                time.sleep(0.05)
                continue
            try:
                self._pool.submit(self._serve_connection, conn)
            except RuntimeError:  # pool shut down while stopping
                conn.close()
                break

    def _serve_connection(self, conn: socket.socket) -> None:
        with self._cond:
            self._conns.add(conn)
        try:
            self._serve_lines(conn)
        finally:
            with self._cond:
                self._conns.discard(conn)

    def _serve_lines(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(IDLE_CONNECTION_S)
            f = conn.makefile("rb")
            try:
                while not self._stop.is_set():
                    try:
                        line = f.readline(MAX_LINE + 1)
                    except OSError:
                        return
                    if not line:
                        return
                    op, resp = self.handle(line)
                    try:
                        conn.sendall(json.dumps(resp, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
                    except OSError:
                        return
                    if op == "stop" and resp.get("ok"):
                        self.request_stop()
                        return
            finally:
                f.close()

    def handle(self, line: bytes) -> tuple[str, dict[str, Any]]:
        """One request line -> (op, response). Never raises: a bad request is an error response."""
        with self._cond:
            self.stats["requests"] += 1
            self._inflight += 1
        try:
            return self._handle(line)
        finally:
            with self._cond:
                self._inflight -= 1
                if not self._inflight:
                    self._cond.notify_all()

    def _handle(self, line: bytes) -> tuple[str, dict[str, Any]]:
        op = ""
        try:
            if len(line) > MAX_LINE:
                raise UsageError("request too large")
            try:
                req = json.loads(line)
            except ValueError as e:
                raise UsageError(f"request is not JSON: {e}") from None
            if not isinstance(req, dict):
                raise UsageError("request must be a JSON object")
            op = str(req.get("op") or "")
            args = req.get("args") or {}
            if not isinstance(args, dict):
                raise UsageError("args must be a JSON object")
            fn = self._ops().get(op)
            if fn is None:
                raise UsageError(f"unknown op {op!r}", hint="one of: " + ", ".join(sorted(self._ops())))
            return op, {"ok": True, "result": fn(args)}
        except HiveBrainError as e:
            self.stats["errors"] += 1
            return op, {"ok": False, "error": {"type": type(e).__name__, "message": e.message, "hint": e.hint}}
        except Exception as e:  # noqa: BLE001 - a bug in one request must never take the server down
            self.stats["errors"] += 1
            self.log.exception("op %r failed", op)
            return op, {"ok": False, "error": {"type": "InternalError", "message": f"{type(e).__name__}: {e}",
                                               "hint": f"see {self.log_path}"}}

    def _ops(self) -> dict[str, Callable[[dict], Any]]:
        return {"ping": self.op_ping, "status": self.op_status, "recall": self.op_recall, "answer": self.op_answer,
                "catch_up": self.op_catch_up, "stop": self.op_stop}

    def op_ping(self, args: dict) -> dict:
        snap = self._snap
        return {"pong": True, "pid": os.getpid(), "ready": self._ready.is_set(),
                "generation": snap.generation if snap else None, "error": self.error}

    def op_stop(self, args: dict) -> dict:
        self.log.info("stop requested by a client")
        return {"stopping": True, "pid": os.getpid()}

    def op_status(self, args: dict) -> dict:
        snap = self._snap
        last = self._last_catch_up
        return {
            "pid": os.getpid(), "vault": str(self.vault.root), "state_dir": str(self.state), "socket": str(self.socket),
            "log": str(self.log_path), "ready": self._ready.is_set(), "error": self.error,
            "started": self.started_at, "uptime_s": round(time.time() - (self.started_at or time.time()), 1),
            "generation": snap.generation if snap else None,
            "semantic": {"on": bool(snap and snap.embedder is not None), "off_reason": snap.semantic_off if snap else None,
                         "pending_passages": snap.pending if snap else None, "embed_chunk": self._chunk,
                         "vector_writes_since_compaction": self._vec_writes},
            "watcher": self.watcher, "debounce_s": self.debounce, "resync_s": self.resync,
            "catch_ups": self._cycles, "last_catch_up": last, "requests": self.stats["requests"],
            "errors": self.stats["errors"], "warnings": list(snap.warnings) if snap else [],
        }

    def op_catch_up(self, args: dict) -> dict:
        """Catch up now (no debounce) and wait for it: for scripts that just wrote notes by hand."""
        timeout = float(args.get("timeout", self.settings.lock_timeout))
        deadline = time.monotonic() + timeout
        with self._cond:
            # A cycle already running may have scanned before the caller's change: wait for the next.
            target = self._started_seq + 1
            self._dirty = self._forced = True
            self._cond.notify_all()
            while self._done_seq < target:
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    raise LockTimeout(f"catch-up did not finish within {timeout:g}s",
                                      hint="another process may hold the vault lock")
                self._cond.wait(left)
        snap = self._snap
        return {"generation": snap.generation if snap else None, "last": self._last_catch_up}

    # -- read ops ---------------------------------------------------------------------------------
    def _catalog(self) -> Any:
        cat = getattr(self._tls, "catalog", None)
        if cat is None:
            from ..store.catalog import Catalog

            cat = Catalog(self.vault, max_note_bytes=self.settings.max_note_bytes)
            self._tls.catalog = cat
        return cat

    def _view(self, semantic: bool) -> Any:
        from ..search.recall import View

        snap = self._snap
        if snap is None or not self._ready.is_set():
            raise ServerNotReady("the hive-brain server is still building its index view",
                                 hint="retry in a moment, or work in-process")
        warnings = list(snap.warnings)
        vectors = embedder = None
        off = None
        if semantic and snap.vectors is not None and snap.embedder is not None:
            vectors, embedder = snap.vectors, snap.embedder
            if snap.pending:
                warnings.append(f"{snap.pending} passages are not embedded yet; semantic search covers the rest")
        elif semantic:
            off = snap.semantic_off
        return View(lexical=snap.lexical, catalog=self._catalog(), vectors=vectors, embedder=embedder,
                    generation=snap.generation, warnings=warnings, semantic_off_reason=off)

    @staticmethod
    def _read_args(args: dict, extra: frozenset[str] = frozenset()) -> tuple[str, str | None, bool, dict]:
        query = args.get("query")
        if not isinstance(query, str):
            raise UsageError("args.query must be a string")
        unknown = set(args) - RECALL_OPTIONS - {"query", "agent", "semantic"} - extra
        if unknown:
            raise UsageError(f"unknown recall option(s): {', '.join(sorted(unknown))}",
                             hint="one of: " + ", ".join(sorted(RECALL_OPTIONS | {'agent', 'semantic'})))
        agent = args.get("agent")
        # The caller's own agent id, never the server's: an absent id means the owner (shared layer).
        agent = validate_agent_id(agent) if agent is not None else None
        opts = {k: v for k, v in args.items() if k in RECALL_OPTIONS and v is not None}
        return query, agent, bool(args.get("semantic", True)), opts

    def op_recall(self, args: dict) -> dict:
        from ..search.recall import search

        query, agent, semantic, opts = self._read_args(args)
        res = search(self._view(semantic), query, agent=agent, semantic=semantic, **opts)
        res["via"] = "server"
        return res

    def op_answer(self, args: dict) -> dict:
        from ..search.answer import answer_view

        query, agent, semantic, opts = self._read_args(args, frozenset({"budget"}))
        pack = answer_view(self._view(semantic), query, agent=agent, semantic=semantic, budget=args.get("budget"), **opts)
        pack["via"] = "server"
        return pack


# ---------------------------------------------------------------------------------------------- entry points
def run_foreground(settings: Settings, *, on_started: Callable[[Server], None] | None = None) -> int:
    """``hive-brain serve``: serve until ``stop``, SIGTERM or SIGINT; returns the exit code."""
    srv = Server(settings)
    srv.start()
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[sig] = signal.signal(sig, lambda *_: srv.request_stop())
    try:
        if on_started is not None:
            on_started(srv)
        while not srv.wait(1.0):
            pass
    finally:
        srv.close()
        for sig, h in previous.items():
            signal.signal(sig, h)
    return 0


def stop_server(state_dir: Path, *, timeout: float = 15.0) -> dict[str, Any]:
    """Stop the vault's server (op ``stop``, else SIGTERM) and wait until it has exited."""
    state_dir = Path(state_dir)
    lock = PidLock(state_dir / LOCK_NAME)
    if lock.acquire():
        # Nobody serves: clear what a killed server left behind, under the lock so we race no start.
        try:
            _remove_stale(state_dir, socket_path(state_dir))
        finally:
            lock.release()
        return {"was_running": False, "stopped": False, "pid": None}
    pid = lock.holder() or (read_info(state_dir) or {}).get("pid")
    method = "stop request"
    try:
        call(state_dir, "stop", timeout=2.0)
    except ServerUnavailable:
        method = "SIGTERM"
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while server_running(state_dir):
        if time.monotonic() >= deadline:
            raise HiveBrainError(f"the hive-brain server (pid {pid}) did not stop within {timeout:g}s",
                                 hint=f"kill it: kill -9 {pid}")
        time.sleep(0.05)
    return {"was_running": True, "stopped": True, "pid": pid, "method": method}
