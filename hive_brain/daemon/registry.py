"""Every hive-brain server of this user: the "one per vault" lock outside the state dir, and the list.

The server's lock used to live in its state dir, so ``rm -rf`` of that dir (a tester trying
hive-brain in temp folders, a "reset") took the lock with it: a second server started for the same
vault while the first kept running, and nothing could find the first again. Now the lock is a file in
the user's runtime dir (``$XDG_RUNTIME_DIR/hive-brain/servers/``, else ``/tmp/hive-brain-<uid>/servers/``,
0700), named from the state dir's path, so it outlives the state dir; the holder writes who it is
(pid, vault, state dir and its inode, start time) into it. Those files are also the list of servers
``serve --list`` shows; on Linux ``/proc`` adds any ``hive_brain ... serve`` process an older version
started without one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import HiveBrainError
from ..store.lock import FileLock, pid_alive

SERVERS_DIR = "servers"
PROBE = "probe"  # the command a lock probe writes: a starting server retries rather than refuse


def runtime_dir() -> Path:
    """The user's runtime folder for hive-brain (created 0700, refused when not ours)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    base: Path | None = None
    if xdg and os.path.isabs(xdg):
        with contextlib.suppress(OSError):
            st = os.stat(xdg)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
                base = Path(xdg) / "hive-brain"
    if base is None:
        from ..rpc.client import fallback_socket_dir

        base = fallback_socket_dir()
    for d in (base, base / SERVERS_DIR):
        private_dir(d, "keep server locks there", hint=f"remove {d}")
    return base


def private_dir(d: Path, purpose: str, *, hint: str) -> None:
    """``d`` made (0700) or checked as a directory of this user's alone: the runtime and socket folders
    may be under /tmp, where another user could have made them first."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o700)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise HiveBrainError(f"{d} is not a directory owned by you; refusing to {purpose}", hint=hint)
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)


def lock_path(state_dir: Path | str) -> Path:
    """The "one server per vault" lock of the vault whose state dir is ``state_dir``: keyed by the
    state dir's path, so the same vault (and state dir) maps to the same lock after an ``rm -rf``."""
    key = hashlib.sha1(os.fsencode(os.path.realpath(os.fspath(state_dir)))).hexdigest()[:16]
    return runtime_dir() / SERVERS_DIR / f"{key}.lock"


def holder(state_dir: Path | str) -> dict[str, Any] | None:
    """Who holds the server lock of ``state_dir`` (what it wrote), or None when nobody does."""
    lock = FileLock(lock_path(state_dir))
    if not lock.path.exists():
        return None
    if lock.acquire(0, command=PROBE):
        lock.release()
        return None
    return lock.holder_info() or {}


# ---------------------------------------------------------------------------------------------- the list
def _rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if sys.platform == "darwin":
        import subprocess

        with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
            out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
            return int(out.stdout.strip()) * 1024
    return None


def _runtime_of(pid: int) -> str | None:
    """The ``XDG_RUNTIME_DIR`` process ``pid`` was started with (None: unset or unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for kv in env:
        if kv.startswith(b"XDG_RUNTIME_DIR="):
            return kv.split(b"=", 1)[1].decode("utf-8", "replace") or None
    return None


def _proc_servers() -> dict[int, dict[str, Any]]:
    """Linux: ``python -m hive_brain ... serve`` processes of this user, from /proc (a server of an
    older version has no lock file in the runtime dir), started with this process's runtime dir: one
    started under another (a test session's, another login's) registers there, and ``serve --stop
    --all`` here stopped the servers of a test suite running beside it."""
    found: dict[int, dict[str, Any]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    uid = os.getuid()
    ours = os.environ.get("XDG_RUNTIME_DIR") or None
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if "hive_brain" not in argv or "serve" not in argv or "-m" not in argv:
            continue
        i = argv.index("serve")
        if any(a.startswith("--") and a not in ("--vault",) for a in argv[i + 1:]):
            continue  # serve --stop / --status / --list: a client, not a server
        if _runtime_of(pid) != ours:
            continue
        vault = argv[argv.index("--vault") + 1] if "--vault" in argv[:-1] else None
        found[pid] = {"pid": pid, "vault": vault}
    return found


def servers() -> list[dict[str, Any]]:
    """Every hive-brain server of this user under this runtime dir: {pid, vault, stateDir, startedTs, uptimeS, rssBytes,
    registered}; ``registered`` is false for one found only in /proc (an older version)."""
    out: dict[int, dict[str, Any]] = {}
    folder = runtime_dir() / SERVERS_DIR
    for path in sorted(folder.glob("*.lock")):
        lock = FileLock(path)
        if lock.acquire(0, command=PROBE):
            lock.release()
            continue
        info = lock.holder_info() or {}
        pid = info.get("pid")
        if not isinstance(pid, int) or not pid_alive(pid):
            continue
        out[pid] = {"pid": pid, "vault": info.get("vault"), "stateDir": info.get("stateDir"),
                    "startedTs": info.get("startedTs"), "registered": True}
    for pid, info in _proc_servers().items():
        if pid not in out:
            out[pid] = {**info, "stateDir": None, "startedTs": _started_ts(pid), "registered": False}
    now = time.time()
    rows = []
    for pid, row in sorted(out.items()):
        started = row.get("startedTs")
        row["uptimeS"] = round(now - started, 1) if isinstance(started, int | float) else None
        row["rssBytes"] = _rss_bytes(pid)
        rows.append(row)
    return rows


def _started_ts(pid: int) -> float | None:
    """When a process started (Linux: from /proc/<pid>/stat and the boot time)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, counted after the comm's ")"
        with open("/proc/stat", encoding="ascii") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def gone(pid: int) -> bool:
    """The process has exited: reaped here if it is our child; another's counts once it is a zombie
    with no thread left (a leader shows "Z" while its other threads are still exiting)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid  # our child: exited only once it can be reaped
    except ChildProcessError:
        pass
    except OSError:
        pass
    if not pid_alive(pid):
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            zombie = f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        return zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except (OSError, IndexError):
        return not os.path.exists(f"/proc/{pid}") if sys.platform.startswith("linux") else False
