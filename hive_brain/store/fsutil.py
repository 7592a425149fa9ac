"""Durable file writes: unique temp name in the same folder, fsync, atomic rename, fsync the folder."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Iterator
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


def write_fsync(path: Path, data: bytes) -> None:
    """Write a file that does not exist yet (or may be clobbered) and fsync it."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL on a random name is what tempfile.mkstemp does; done here because importing tempfile
    # (shutil, random) costs a few ms on every write command.
    tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Never leave a half-written temp file behind, whatever interrupted us.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


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
