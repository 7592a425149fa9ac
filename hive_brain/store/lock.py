"""The one cross-process write lock of a vault (a portalocker lock on a file in the state dir).

Every write — notes, journal, generations, the index writer — happens while holding it. The OS
releases the lock when the holder dies (even on kill -9), so a crashed writer never wedges the vault;
what it left half-done is repaired by the journal on the next acquisition.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..errors import LockTimeout
from ..rpc.client import pid_alive

_local = threading.local()


def _holder_info(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        alive = pid_alive(int(info.get("pid", 0)))
        return f"pid {info.get('pid')} ({info.get('command', '?')}, since {info.get('since', '?')}{'' if alive else ', not running'})"
    except (OSError, ValueError, TypeError):
        return "an unknown process"


@contextmanager
def vault_lock(state_dir: Path, *, timeout: float = 30.0, command: str = "write") -> Iterator[None]:
    """Hold the vault's write lock; re-entrant within one thread."""
    import portalocker  # here, not at the top: the read-only hook path never locks and skips ~30 ms

    state_dir.mkdir(parents=True, exist_ok=True)
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
    lock_path = state_dir / "lock"
    holder_path = state_dir / "lock.holder"
    fh = open(lock_path, "a+")  # noqa: SIM115 - lifetime spans the with-block below
    deadline = time.monotonic() + max(0.0, timeout)
    try:
        while True:
            try:
                portalocker.lock(fh, portalocker.LOCK_EX | portalocker.LOCK_NB)
                break
            except portalocker.exceptions.LockException:
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"the vault is locked by {_holder_info(holder_path)}; waited {timeout:g}s",
                        hint="wait for it to finish, or raise HIVE_BRAIN_LOCK_TIMEOUT",
                    ) from None
                time.sleep(0.02)
        info = {"pid": os.getpid(), "command": command, "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        try:
            holder_path.write_text(json.dumps(info), encoding="utf-8")
        except OSError:
            pass  # the holder file is advisory; the lock itself is what protects
        held[key] = 1
        try:
            yield
        finally:
            held[key] = 0
            with suppress(OSError):
                holder_path.unlink()
            portalocker.unlock(fh)
    finally:
        fh.close()
