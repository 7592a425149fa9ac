"""``hive-brain serve``: one long-running process per vault that keeps the index current and answers
recalls warm. This module holds its lifecycle (start, stop, the pid lock, the log, ``server.json``);
the work is split by thread:

* :mod:`.indexing` — the watchdog observer (file events become "dirty" marks) and the indexing
  thread, the only index writer of this process, which publishes an immutable snapshot for readers;
* :mod:`.embedding` — background embedding of queued passages and vector-table compaction, run by
  the indexing thread between catch-ups and never while a request is being answered;
* :mod:`.sockets` — the accept thread and worker pool answering requests (see
  :mod:`hive_brain.rpc.client` for the protocol) from the current snapshot, never taking the lock.

One server per vault is enforced by an ``flock`` on ``<state>/server.lock``, held for the life of the
process: the OS drops it on any death, even ``kill -9``, so a stale ``server.json`` or socket never
blocks the next start (the next server removes them).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import stat
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
from .indexing import DEBOUNCE_S, RESYNC_S, IndexingLoop
from .sockets import SocketServer

LOG_MAX_BYTES = 4 * 1024 * 1024
LOG_KEEP_BYTES = 512 * 1024


class AlreadyRunning(Refused):
    """A server already serves this vault."""


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
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state_dir / READY_NAME)


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
        self._pidlock = PidLock(self.state / LOCK_NAME)
        self.stopping = threading.Event()
        self.indexing = IndexingLoop(settings, self.vault, self.stopping, debounce=debounce, resync=resync,
                                     on_resync=lambda: _trim_log(self.log_path))
        self.sockets = SocketServer(self)
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
        if not self._pidlock.acquire(0, command="serve"):
            pid = self._pidlock.holder() or (read_info(self.state) or {}).get("pid")
            raise AlreadyRunning(f"hive-brain serve is already running (pid {pid}) for {self.vault.root}",
                                 hint="stop it with `hive-brain serve --stop`")
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
        self._pidlock.release()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- entry points
def run_foreground(settings: Settings, *, on_started: Callable[[Server], None] | None = None) -> int:
    """``hive-brain serve``: serve until ``stop``, SIGTERM or SIGINT; returns the exit code."""
    srv = Server(settings)
    srv.start()
    previous: dict[signal.Signals, Any] = {}
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
        return {"wasRunning": False, "stopped": False, "pid": None}
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
    return {"wasRunning": True, "stopped": True, "pid": pid, "method": method}
