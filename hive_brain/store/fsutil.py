"""Durable file writes (unique temp name in the same folder, fsync, atomic rename, fsync the folder),
and what to do with a per-device state file found damaged: move it aside, say so, start afresh."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def due(marker: Path, every_s: float) -> bool:
    """True (and ``marker`` touched) when it was not touched in the last ``every_s`` seconds: an
    action done at most once per interval across processes (starting a server or a rebuild that may
    fail again at once). False also when the marker cannot be written."""
    try:
        if time.time() - marker.stat().st_mtime < every_s:
            return False
    except OSError:
        pass
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        return False
    return True


_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100
_renameat2: Callable[..., int] | None | bool = False  # False: not looked up yet; None: libc has none


def _rename2(src: Path, dst: Path, flags: int) -> bool:
    """Linux ``renameat2``: False when this libc or file system cannot do it (the caller falls back
    to a plain rename); OSError for any other failure. ctypes is imported only here, since the
    prompt hook imports this module."""
    global _renameat2
    if _renameat2 is False:
        import ctypes

        try:
            fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
        except OSError:
            fn = None
        if fn is not None:
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
        _renameat2 = fn
    if not callable(_renameat2):
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    import ctypes

    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (``RENAME_EXCHANGE``); False when unsupported here.

    This is the compare-and-swap POSIX lacks: swap the staged note in, then look at what came out.
    An editor's save that landed before the swap is in the file that came out, never lost."""
    return _rename2(a, b, _RENAME_EXCHANGE)


def rename_noreplace(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst`` only if ``dst`` does not exist (FileExistsError if it does, in the
    same step, so a file that appears at the last moment is never replaced); False when unsupported."""
    return _rename2(src, dst, _RENAME_NOREPLACE)


def write_fsync(path: Path, data: bytes) -> None:
    """Write a file that does not exist yet (or may be clobbered) and fsync it."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` in one rename. ``durable=False`` skips the fsyncs, for derived
    files a later run rewrites anyway (an OKF export: the fsyncs were three quarters of its time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL on a random name is what tempfile.mkstemp does; done here because importing tempfile
    # (shutil, random) costs a few ms on every write command.
    tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Never leave a half-written temp file behind, whatever interrupted us.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


@contextmanager
def sqlite_tx(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One explicit transaction on an autocommit connection (``isolation_level=None``).

    ``with conn:`` does not open a transaction in autocommit mode, so every row of an
    ``executemany`` would commit (and sync) on its own; rolls back on any exception.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


DAMAGED_MARK = ".damaged-"  # <name>.damaged-<UTC time>: a state file moved aside (see quarantine)


REBUILT = "rebuilt from the notes"
LOCK_FATE = "replaced by a new lock file"


def _is_lock(name: str) -> bool:
    """A lock file's name (store.lock.FileLock's: the vault lock, the server's, its start lock, a log's)."""
    return name == "lock" or name.endswith((".lock", ".starting"))


def quarantine(path: Path, problem: str, *, fate: str = REBUILT) -> Path | None:
    """Move a damaged per-device state file or folder aside as ``<name>.damaged-<UTC time>`` (kept
    for inspection, never read again) and say so in one line on stderr; the caller then starts it
    afresh and rebuilds it from the notes. SQLite's ``-wal``/``-shm`` files go with it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = path.with_name(f"{path.name}{DAMAGED_MARK}{stamp}")
    n = 1
    while dest.exists():
        n += 1
        dest = path.with_name(f"{path.name}{DAMAGED_MARK}{stamp}.{n}")
    try:
        os.replace(path, dest)
    except FileNotFoundError:
        return None  # someone else moved it already
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.replace(path.with_name(path.name + suffix), dest.with_name(dest.name + suffix))
    fsync_dir(path.parent)
    import logging  # lazily: the prompt hook imports this module

    logging.getLogger("hive_brain").warning(
        "hive-brain: %s was damaged (%s); moved aside as %s and %s",
        _shown(path), one_line(problem), dest.name, fate)
    return dest


def _shown(path: Path) -> str:
    return f"{path.parent.name}/{path.name}" if path.parent.name in ("index", "generations") else path.name


def one_line(problem: str) -> str:
    """A library's error as one short line (LanceDB appends the Rust source location)."""
    first = (problem.strip().splitlines() or ["unreadable"])[0]
    return first.split(", /root/.cargo/")[0].split(", /home/")[0][:200]


def connect_sqlite(path: Path, setup: Callable[[sqlite3.Connection], None], *, timeout: float = 30.0,
                   check_same_thread: bool = True) -> tuple[sqlite3.Connection, bool]:
    """Open a derived SQLite file (autocommit: use ``sqlite_tx``) and run ``setup`` (pragmas, schema) on it. A file SQLite calls
    damaged is moved aside (``quarantine``) and a new, empty one is opened: (connection, was reset)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=check_same_thread)
    try:
        setup(db)
        return db, False
    except sqlite3.DatabaseError as e:
        db.close()
        quarantine(path, str(e))
    db = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=check_same_thread)
    setup(db)
    return db, True


def sqlite_damage(db: sqlite3.Connection) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with an open SQLite file (None: nothing). It reads the
    whole file: for ``doctor`` and ``rebuild-index``, not for every command."""
    try:
        rows = db.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as e:
        return str(e)
    problems = [str(r[0]) for r in rows if r and r[0] != "ok"]
    return "; ".join(problems[:3]) or None


def damaged_files(state_dir: Path) -> list[dict[str, str]]:
    """Every state file moved aside as damaged (``quarantine``) and every journal record recovery
    could not trust (``journal/damaged/``), for ``status`` and ``doctor``: kept for inspection,
    safe to delete once looked at. ``fate``: what took its place, as said when it was moved."""
    out: list[dict[str, str]] = []
    for base in (state_dir, state_dir / "generations", state_dir / "index", state_dir / "pending-writes"):
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            if DAMAGED_MARK in name and not name.endswith(("-wal", "-shm")):
                what, _, since = name.partition(DAMAGED_MARK)
                rel = (base / name).relative_to(state_dir).as_posix()
                out.append({"file": (base / what).relative_to(state_dir).as_posix(), "movedTo": rel, "since": since,
                            "fate": LOCK_FATE if _is_lock(what) else REBUILT})
    jq = state_dir / "journal" / "damaged"
    try:
        for name in sorted(os.listdir(jq)):
            out.append({"file": f"journal/{name}.json", "movedTo": f"journal/damaged/{name}", "since": ""})
    except OSError:
        pass
    return out
