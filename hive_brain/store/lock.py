"""The one lock implementation: an ``flock`` on a file, for the vault's write lock and the server's
"only one per vault" lock alike.

The OS releases an ``flock`` when its holder dies (even on kill -9), so a crashed writer never wedges
the vault; what it left half-done is repaired by the journal on the next acquisition. The holder
writes who it is (pid, command, since) into the lock file itself, so a waiter that gives up can say
who held it.

Fairness: a contended acquisition blocks *in the kernel* (``flock(LOCK_EX)`` without ``LOCK_NB``),
which puts the waiter on the lock's wait list and wakes it the moment the holder releases. The old
lock polled every 20 ms: a writer releasing and re-taking the lock within a few milliseconds (a loop
of writes) won every time against waiters that were asleep, and on a loaded machine some waiters
starved into their timeout. (Since Linux 5.1 a blocked request that conflicts with an earlier
waiter is queued behind it, so exclusive waiters are served in about their order of arrival.) A blocking ``flock`` cannot take a timeout, so the blocking call runs
in a helper thread and the caller waits on it with one; chosen over ``signal.setitimer`` (main thread
only: the server takes this lock from worker threads) and over a ticket queue in files (crashed
waiters leave tickets that need liveness checks; the kernel's list has none of that). A helper whose
callers all gave up still gets the lock eventually and drops it at once (see ``_Request``).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from _thread import _local as _ThreadLocal
from _thread import allocate_lock as _allocate_lock
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..errors import LockTimeout

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook's process imports this module
if TYPE_CHECKING:
    from typing import Any

# The C thread-local behind threading.local (always loaded): the prompt hook imports this module
# (through the server client's pid_alive) and never locks, so it need not import threading.
_local = _ThreadLocal()


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except IsADirectoryError:
        # A lock file holds nothing but who held it last: a folder in its place (a mistaken mkdir, a
        # sync tool) is moved aside, kept and listed by status/doctor, and a new lock file made.
        from .fsutil import LOCK_FATE, quarantine

        quarantine(path, "a folder stood where the lock file belongs", fate=LOCK_FATE)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def pid_alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FileLock:
    """An exclusive ``flock`` on ``path``; not re-entrant by itself (``vault_lock`` adds that).

    ``acquire(0)`` is a single try ("am I the only server?"); a positive timeout waits in the
    kernel's queue; ``None`` waits for ever. The holder's pid/command/since are written into the file.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.fd: int | None = None

    def acquire(self, timeout: float | None = 0.0, *, command: str = "", info: dict[str, Any] | None = None) -> bool:
        if self.fd is not None:
            raise RuntimeError(f"{self.path} is already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        first = _open(self.path)
        # flock works on a read-only handle: a lock file others can open is one they can hold, and
        # block every write. One made 0644 by an older version is tightened on first use.
        with suppress(OSError):
            if os.fstat(first).st_mode & 0o077:
                os.fchmod(first, 0o600)
        if _try(first):
            fd = first
        else:
            os.close(first)
            if timeout is not None and timeout <= 0:
                return False
            waited = _queued_wait(self.path, timeout)
            if waited is None:
                return False
            fd = waited
        self.fd = fd
        who = {"pid": os.getpid(), "command": command, "since": time.strftime("%Y-%m-%dT%H:%M:%S"), **(info or {})}
        with suppress(OSError):  # advisory: the lock itself is what protects
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(who).encode(), 0)
        return True

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is None:
            return
        with suppress(OSError):
            os.ftruncate(fd, 0)  # a later reader must not name a holder that has gone
        with suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @property
    def held(self) -> bool:
        return self.fd is not None

    def holder_info(self) -> dict[str, Any] | None:
        """What the current (or last) holder wrote: {"pid", "command", "since"}; None if unknown."""
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not text:
            return None
        try:
            info = json.loads(text)
        except ValueError:
            return None
        if isinstance(info, int):  # a server of an older version wrote its bare pid
            return {"pid": info}
        return info if isinstance(info, dict) else None

    def holder(self) -> int | None:
        """The holder's pid (the server's "already running as pid N")."""
        info = self.holder_info() or {}
        try:
            return int(info.get("pid") or 0) or None
        except (TypeError, ValueError):
            return None

    def describe_holder(self) -> str:
        info = self.holder_info()
        if not info:
            return "an unknown process"
        alive = pid_alive(self.holder())
        return (f"pid {info.get('pid')} ({info.get('command') or '?'}, since {info.get('since', '?')}"
                f"{'' if alive else ', not running'})")


def _try(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


class _Request:
    """One blocking ``flock`` request queued in the kernel for a lock file, shared by every waiter of
    this process: a server whose short waits keep timing out while a long rebuild holds the lock
    leaves one queued helper thread, not one per attempt. When it gets the lock it hands it to a
    waiter still interested, or drops it at once when every waiter has given up."""

    def __init__(self, key: str, path: Path) -> None:
        import threading

        self.key = key
        self.fd = _open(path)
        self.got = self.taken = False
        self.interest = 0
        self.error: OSError | None = None
        self.event = threading.Event()
        threading.Thread(target=self._run, name=f"flock-wait {path.name}", daemon=True).start()

    def _run(self) -> None:
        error = None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as e:
            error = e
        with _requests_mtx:
            if _requests.get(self.key) is self:
                del _requests[self.key]  # from now on a new waiter queues a new request
            if error is not None:
                self.error = error
                os.close(self.fd)
            elif self.interest == 0:
                with suppress(OSError):
                    fcntl.flock(self.fd, fcntl.LOCK_UN)  # everyone gave up: hand it to the next process
                os.close(self.fd)
            else:
                self.got = True
        self.event.set()


_requests: dict[str, _Request] = {}
_requests_mtx = _allocate_lock()


def _forget_requests_after_fork() -> None:
    # A forked child has none of the parent's helper threads: waiting on their requests would hang.
    global _requests_mtx
    _requests.clear()
    _requests_mtx = _allocate_lock()


os.register_at_fork(after_in_child=_forget_requests_after_fork)


def _queued_wait(path: Path, timeout: float | None) -> int | None:
    """Wait in the kernel's queue for ``path`` up to ``timeout``; the locked fd, or None."""
    deadline = None if timeout is None else time.monotonic() + timeout
    key = str(path)
    while True:
        with _requests_mtx:
            req = _requests.get(key)
            if req is None:
                req = _requests[key] = _Request(key, path)
            req.interest += 1
        interrupted = True
        try:
            req.event.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
            interrupted = False
        finally:
            with _requests_mtx:
                req.interest -= 1
                mine = req.got and not req.taken
                req.taken = req.taken or mine
            if mine and interrupted:  # e.g. Ctrl-C while waiting: never keep a lock nobody will release
                with suppress(OSError):
                    fcntl.flock(req.fd, fcntl.LOCK_UN)
                os.close(req.fd)
        if mine:
            return req.fd
        if req.error is not None:
            raise req.error
        # Timed out, or the request was served to another thread of this process: queue again.
        if deadline is not None and time.monotonic() >= deadline:
            return None


@contextmanager
def vault_lock(state_dir: Path, *, timeout: float = 30.0, command: str = "write") -> Iterator[None]:
    """Hold the vault's write lock; re-entrant within one thread."""
    key = str(state_dir)
    held: dict[str, int] = getattr(_local, "held", None) or {}
    _local.held = held
    if held.get(key):
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    lock = FileLock(Path(state_dir) / "lock")
    if not lock.acquire(max(0.0, timeout), command=command):
        raise LockTimeout(
            f"the vault is locked by {lock.describe_holder()}; waited {timeout:g}s",
            hint="wait for it to finish, or raise HIVE_BRAIN_LOCK_TIMEOUT",
        )
    held[key] = 1
    try:
        yield
    finally:
        held[key] = 0
        lock.release()
