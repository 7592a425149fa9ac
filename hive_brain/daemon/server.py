"""``hive-brain serve``: one long-running process per vault that keeps the index current and answers
recalls warm. This module holds its lifecycle (start, stop, the pid lock, the log, ``server.json``);
the work is split by thread:

* :mod:`.indexing` — the watchdog observer (file events become "dirty" marks) and the indexing
  thread, the only index writer of this process, which publishes an immutable snapshot for readers;
* :mod:`.embedding` — background embedding of queued passages and vector-table compaction, run by
  the indexing thread between catch-ups and never while a request is being answered;
* :mod:`.sockets` — the accept thread and worker pool answering requests (see
  :mod:`hive_brain.rpc.client` for the protocol) from the current snapshot, never taking the lock.

One server per vault is enforced by an ``flock`` held for the life of the process on a file in the
user's runtime dir named from the state dir (:mod:`.registry`; it survives an ``rm -rf`` of the
state dir), and on ``<state>/server.lock`` (what older versions hold): the OS drops both on any death,
even ``kill -9``, so a stale ``server.json`` or socket never blocks the next start (the next server
removes them). None without a vault: a life check every ``LIFE_CHECK_S`` stops the server when its
vault or state dir is gone or replaced (another inode), when its lock file is gone, or after
``idle_exit`` without a request.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import HiveBrainError, Refused
from ..rpc.client import (
    INFO_NAME,
    LOCK_NAME,
    LOG_NAME,
    READY_NAME,
    ServerUnavailable,
    call,
    fallback_socket_dir,
    read_info,
    socket_path,
)
from ..store.lock import FileLock as PidLock  # one lock implementation: the vault lock's, tried once
from . import registry
from .indexing import DEBOUNCE_S, RESYNC_S, IndexingLoop
from .sockets import SocketServer

LOG_MAX_BYTES = 4 * 1024 * 1024
LOG_KEEP_BYTES = 512 * 1024
LIFE_CHECK_S = 2.0
SWITCH_INTERVAL_S = 0.0005  # the GIL's hand-over time in a server process (run_foreground says why)
# How often a running server looks whether the embedding pack it would load now is the one it loaded.
PACK_CHECK_S = 6.0
# Idle this long (no request, nothing to embed or read ahead) and the models' batch sessions are
# released (Embedder.release_batch_session): ~150 MB of a 1k-note hybrid server (docs/benchmarks.md).
BATCH_IDLE_S = 30.0
# How long a new server waits for one whose state dir was replaced (rm -rf) to notice and exit.
REPLACED_HOLDER_WAIT_S = 20.0


class AlreadyRunning(Refused):
    """A server already serves this vault."""


def server_running(state_dir: Path) -> bool:
    """True while some process holds a server lock of this state dir (works across zombies too)."""
    if registry.holder(state_dir) is not None:
        return True
    lock = PidLock(Path(state_dir) / LOCK_NAME)
    if not lock.path.exists():
        return False
    if lock.acquire(command=registry.PROBE):
        lock.release()
        return False
    return True


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _remove_stale(state_dir: Path, sock: Path) -> None:
    """Called only while holding the server lock, so nothing live can own these files."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(sock).st_mode):
            os.unlink(sock)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state_dir / INFO_NAME)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state_dir / READY_NAME)


def _prepare_socket_dir(sock: Path, state_dir: Path) -> None:
    if sock.parent == state_dir:
        state_dir.mkdir(parents=True, exist_ok=True)
        return
    d = fallback_socket_dir()
    registry.private_dir(d, "put the server socket there", hint=f"remove {d}, or use a shorter HIVE_BRAIN_STATE_DIR")


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
        self._log_to_stderr = log_to_stderr
        self.log: logging.Logger = logging.getLogger("hive_brain.server")
        self._pidlock = PidLock(registry.lock_path(self.state))
        self._statelock = PidLock(self.state / LOCK_NAME)
        self.stopping = threading.Event()
        self.stop_reason: str | None = None
        self.restart = False  # stopped to start again (run_foreground execs itself): the pack changed
        self._ids: dict[str, tuple[int, int] | None] = {}
        self.indexing = IndexingLoop(settings, self.vault, self.stopping, debounce=debounce, resync=resync,
                                     on_resync=lambda: _trim_log(self.log_path))
        self.indexing.alive = self.check_life
        self.indexing.on_dead = self.stop_because
        self.sockets = SocketServer(self)
        self._work_seen: tuple[Any, ...] | None = None  # _trim_heap: the work last seen (not catch-ups),
        self._work_at = time.monotonic()  # and when they last changed
        self._threads: list[threading.Thread] = []
        self.started_at: float | None = None
        self._closed = False

    @property
    def compact_after(self) -> int:
        """Vector-table writes between compactions (tests lower it)."""
        return self.indexing.embedder.compact_after

    @compact_after.setter
    def compact_after(self, n: int) -> None:
        self.indexing.embedder.compact_after = n

    def handle(self, line: bytes) -> tuple[str, dict[str, Any]]:
        """One request line -> (op, response), as if it came over the socket."""
        return self.sockets.handle(line)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Server:
        self.state.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            _trim_log(self.log_path)
            to_stderr = self._log_to_stderr
            if to_stderr is None:
                to_stderr = os.isatty(2)
            self.log = _make_logger(self.log_path, to_stderr, f"hive_brain.server.{id(self):x}")
            self.indexing.log = self.indexing.embedder.log = self.log
            self.started_at = time.time()
            _prepare_socket_dir(self.socket, self.state)
            _remove_stale(self.state, self.socket)
            self.sockets.listen(self._spawn)
            self.indexing.start_watcher()
            self._spawn(self.indexing.run, "hive-brain-indexer")
            self._spawn(self._life, "hive-brain-life")
            self._write_info()
            self.log.info("serving %s (state %s) on %s", self.vault.root, self.state, self.socket)
        except BaseException:
            self.close()
            raise
        return self

    def _lock(self) -> None:
        """Take the vault's server locks (the runtime dir's, then the state dir's), or raise AlreadyRunning.
        A holder whose state dir was replaced under it (another inode) is about to notice and exit: it is
        waited for. So is a probe (``serve --list``, ``--status``) holding the lock for a moment."""
        self._ids = {"vault": _identity(self.vault.root), "marker": _identity(self._marker()),
                     "state": _identity(self.state)}
        ino = (self._ids["state"] or (0, 0))[1]
        who = {"vault": str(self.vault.root), "stateDir": str(self.state), "stateIno": ino, "startedTs": time.time()}
        deadline = time.monotonic() + REPLACED_HOLDER_WAIT_S
        while not self._pidlock.acquire(0, command="serve", info=who):
            held = self._pidlock.holder_info() or {}
            # Nothing readable: the holder exited between our try and this look (the old server of a
            # replaced state dir does just that), or is writing its info: try again, within the deadline.
            wait = not held or held.get("command") == registry.PROBE or held.get("stateIno") not in (None, ino)
            if not wait or time.monotonic() >= deadline:
                raise AlreadyRunning(f"hive-brain serve is already running (pid {held.get('pid')}) for {self.vault.root}",
                                     hint="stop it with `hive-brain serve --stop`")
            time.sleep(0.1)
        deadline = time.monotonic() + 1.0
        while not self._statelock.acquire(0, command="serve"):
            held = self._statelock.holder_info() or {}
            if held.get("command") != registry.PROBE or time.monotonic() >= deadline:
                self._pidlock.release()
                raise AlreadyRunning(f"hive-brain serve is already running (pid {held.get('pid')}) for {self.vault.root}",
                                     hint="stop it with `hive-brain serve --stop`")
            time.sleep(0.05)

    def _marker(self) -> Path:
        from ..store.vault import MARKER_DIR, MARKER_FILE

        return self.vault.root / MARKER_DIR / MARKER_FILE

    def check_life(self) -> str | None:
        """Why this server should not live on (None: it should): its vault or state dir gone or replaced,
        its lock file removed, or idle for longer than ``idle_exit``."""
        for what, path in (("vault", self.vault.root), ("marker", self._marker()), ("state", self.state)):
            now = _identity(path)
            if now != self._ids.get(what):
                name = {"vault": "the vault", "marker": "the vault's marker", "state": "the state dir"}[what]
                return f"{name} {path} is {'gone' if now is None else 'replaced'}"
        fd = self._pidlock.fd
        if fd is not None:
            st = os.fstat(fd)
            if _identity(self._pidlock.path) != (st.st_dev, st.st_ino):
                return f"its lock file {self._pidlock.path} is gone"
        idle = float(getattr(self.settings, "idle_exit", 0.0) or 0.0)
        if idle > 0 and time.monotonic() - self.sockets.last_active >= idle:
            return f"no request for {idle:g}s (idle_exit)"
        return None

    def pack_change(self) -> str | None:
        """Why the models this server loaded are not the ones it would load now (None: they are). A
        server started before `model install` answered lexically for good, while `status` said
        semantic on and every answer said to run the install that had been run."""
        from ..index.indexer import configured_pack_key

        if not self.indexing.ready.is_set():
            return None
        loaded, now = self.indexing.pack_key, configured_pack_key(self.settings)
        if now == loaded:
            return None
        return f"the embedding pack changed ({loaded or 'none'} -> {now or 'none'})"

    def _life(self) -> None:
        trimmed: tuple[Any, ...] | None = None
        pack_at = time.monotonic()
        while not self.stopping.wait(LIFE_CHECK_S):
            try:
                trimmed = self._trim_heap(trimmed)
                why = self.check_life()
                restart = False
                if not why and time.monotonic() - pack_at >= PACK_CHECK_S:
                    pack_at = time.monotonic()
                    why = self.pack_change()
                    restart = why is not None
            except Exception:  # noqa: BLE001 - a check that fails must not stop a healthy server
                self.log.exception("life check failed")
                continue
            if why:
                self.stop_because(why, restart=restart)
                return

    def _trim_heap(self, trimmed: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        """``malloc_trim`` once the server has gone quiet after work (requests, catch-ups, embedding,
        reading ahead): what that work freed goes back to the system instead of staying in the heap.
        Returns the work done so far, to trim again only after more."""
        from . import memory

        loop = self.indexing
        snap = loop.snap
        work = (self.sockets.stats["requests"], loop.cycles, loop.rerank_ahead, snap.pending if snap else None)
        now = time.monotonic()
        # Idle: no request and no new generation (a catch-up that finds nothing, every RESYNC_S, is not work).
        busy = (self.sockets.stats["requests"], snap.generation if snap else None, loop.rerank_ahead,
                snap.pending if snap else None)
        if busy != self._work_seen:
            self._work_seen, self._work_at = busy, now
        quiet = now - self.sockets.last_active
        released = False
        if snap is not None and not snap.pending and not loop.rerank_ahead and min(quiet, now - self._work_at) >= BATCH_IDLE_S:
            # Nothing left to embed or read ahead, and nobody asking: the models' batch sessions go
            # (questions keep their one-thread sessions); the next write's embedding loads them again.
            released = loop.release_batch_sessions()
        if not released and (work == trimmed or quiet < LIFE_CHECK_S):
            return trimmed
        memory.trim()
        return work

    def stop_because(self, why: str, *, restart: bool = False) -> None:
        """Stop (the first reason given wins); ``restart``: ``serve`` starts again in place after it."""
        if self.stop_reason is None:
            self.stop_reason, self.restart = why, restart
            self.log.warning("stopping: %s%s", why, "; restarting" if restart else "")
        self.request_stop()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _write_info(self) -> None:
        from ..store.fsutil import atomic_write_text

        info = {"pid": os.getpid(), "socket": str(self.socket), "vault": str(self.vault.root),
                "stateDir": str(self.state), "log": str(self.log_path),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started_at)),
                "startedTs": self.started_at}
        atomic_write_text(self.state / INFO_NAME, json.dumps(info, indent=2) + "\n")

    def request_stop(self) -> None:
        self.stopping.set()
        self.indexing.wake()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested (op ``stop``, a signal, :meth:`request_stop`)."""
        return self.stopping.wait(timeout)

    def wait_ready(self, timeout: float) -> bool:
        return self.indexing.ready.wait(timeout)

    def close(self, join_timeout: float = 10.0) -> None:
        if self._closed:
            return
        self._closed = True
        self.request_stop()
        self.indexing.stop_watcher()
        for t in self._threads:
            if t.name == "hive-brain-accept":
                t.join(2.0)
        self.sockets.close_listener()
        # Socket and server.json go first: once they are gone no client tries us, even while the
        # indexer finishes its current step below.
        if self._pidlock.fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.state / READY_NAME)
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
        self.indexing.join_watcher()
        self.sockets.shutdown_pool()
        if self._pidlock.fd is not None:
            self.log.info("stopped")
        for h in list(self.log.handlers):
            self.log.removeHandler(h)
            h.close()
        self._statelock.release()
        self._pidlock.release()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- entry points
def run_foreground(settings: Settings, *, on_started: Callable[[Server], None] | None = None) -> int:
    """``hive-brain serve``: serve until ``stop``, SIGTERM or SIGINT; returns the exit code."""
    from . import memory

    memory.limit_arenas()  # before any thread starts: each would get an arena of its own
    # A request thread that gives up the GIL (every tantivy, SQLite and socket call does) waited up to
    # the switch interval (5 ms) to get it back while the indexing thread ran Python: a recall right
    # after a write paid that a dozen times. The server's requests are its latency; its indexing is not.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    srv = Server(settings)
    srv.start()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            # Logged: a server stopped by a signal said only "stopped", so a `serve --stop --all` from
            # another session of the same user (it finds servers in /proc) looked like a crash.
            previous[sig] = signal.signal(sig, lambda n, _f: srv.stop_because(f"signal {signal.Signals(n).name}"))
    try:
        if on_started is not None:
            on_started(srv)
        while not srv.wait(1.0):
            pass
    finally:
        srv.close()
        for sig, h in previous.items():
            signal.signal(sig, h)
    if srv.restart:
        # The same process, command line and environment again (a detached server, a service unit and a
        # terminal alike keep their server): only the models it loads are new.
        logging.shutdown()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return 0


def stop_server(state_dir: Path, *, timeout: float = 15.0) -> dict[str, Any]:
    """Stop the vault's server (op ``stop``, else SIGTERM) and wait until it has exited."""
    state_dir = Path(state_dir)
    held = registry.holder(state_dir)
    lock = PidLock(state_dir / LOCK_NAME)
    if held is None and lock.acquire(command=registry.PROBE):
        # Nobody serves: clear what a killed server left behind, under the lock so we race no start.
        try:
            _remove_stale(state_dir, socket_path(state_dir))
        finally:
            lock.release()
        return {"wasRunning": False, "stopped": False, "pid": None}
    pid = (held or {}).get("pid") or lock.holder() or (read_info(state_dir) or {}).get("pid")
    method = "stop request"
    try:
        call(state_dir, "stop", timeout=2.0)
    except ServerUnavailable:
        method = "SIGTERM"
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    _wait_gone(state_dir, pid if isinstance(pid, int) else None, timeout)
    return {"wasRunning": True, "stopped": True, "pid": pid, "method": method}


def _wait_gone(state_dir: Path | None, pid: int | None, timeout: float) -> None:
    """Until the server has released its locks and its process has exited (not only said so: "stopped"
    used to be printed ~6 s before the process was gone)."""
    deadline = time.monotonic() + timeout
    while (state_dir is not None and server_running(state_dir)) or (pid is not None and not registry.gone(pid)):
        if time.monotonic() >= deadline:
            raise HiveBrainError(f"the hive-brain server (pid {pid}) did not stop within {timeout:g}s",
                                 hint=f"kill it: kill -9 {pid}")
        time.sleep(0.05)


def stop_all(*, timeout: float = 15.0) -> list[dict[str, Any]]:
    """Stop every hive-brain server of this user (:func:`.registry.servers`): SIGTERM to each, then wait
    until all have exited."""
    rows = registry.servers()
    for row in rows:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(row["pid"]), signal.SIGTERM)
    out = []
    for row in rows:
        state = Path(row["stateDir"]) if row.get("stateDir") else None
        try:
            _wait_gone(state, int(row["pid"]), timeout)
            out.append({**row, "stopped": True})
        except HiveBrainError as e:
            out.append({**row, "stopped": False, "error": e.message})
    return out
