"""The one write policy: hand a memory write to the vault's warm server, else do it in-process.

The server already holds the catalog, the index writer and every module a write needs, so a write it
does costs the calling process little more than the interpreter and the CLI's own imports. Writes it
cannot take (no server, an older server, one still building its first view) are done in-process,
exactly as without a server. A write whose request reached the server but got no answer is not done
again here: it may have been applied, and the caller is told so instead (``WriteUnconfirmed``).

In enforcement mode (``HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS``) writes always stay in-process, where the
caller's identity is checked; the server refuses them too.

Import-light, like :mod:`hive_brain.reader`: the write commands import this before deciding.
"""

from __future__ import annotations

from .errors import WriteUnconfirmed

TYPE_CHECKING = False  # typing for the type checker only: the thin client (cli/thin.py) imports this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .config import Settings
    from .memory.store import MemoryStore

__all__ = ["SERVER_MARGIN_S", "request", "unconfirmed", "write"]


def write(settings: Settings, op: str, args: dict[str, Any], *, local: Callable[[], MemoryStore]) -> dict:
    """Run the memory write ``op`` (a :data:`~hive_brain.memory.store.WRITE_OPS` name) with ``args``
    given as data (a MemoryInput as a dict under ``inp``); ``local()`` opens the in-process store."""
    served = settings.use_server and not settings.scoped_permissions
    if served:
        res = _via_server(settings, op, args)
        if res is not None:
            return res
    res = {**local().call(op, args), "via": "local"}
    if served:
        # Like a cold read: start the server (detached, at most once a minute), so the next write
        # costs the client alone (issue 11: p50 130 ms against 200 ms in-process at 1k notes).
        from .rpc.client import autostart

        if autostart(settings):
            res["serverStarted"] = True
    return res


SERVER_MARGIN_S = 10.0  # beyond the lock timeout, for the write itself


def request(op: str, args: dict[str, Any], *, agent: str | None, lock_timeout: float) -> dict[str, Any]:
    """The server's ``write`` request for ``op`` (the thin client, cli/thin.py, sends the same)."""
    return {"op": op, "args": args, "agent": agent, "lock_timeout": lock_timeout}


def unconfirmed(op: str, why: str) -> WriteUnconfirmed:
    """A write the server took but never confirmed: it may have been applied, so it is not done again."""
    return WriteUnconfirmed(f"the server took this {op} but did not confirm it ({why}); it may have been applied",
                            hint="check with `hive-brain recall` or `hive-brain status` before writing it again")


def _via_server(settings: Settings, op: str, args: dict[str, Any]) -> dict | None:
    from .errors import UsageError
    from .rpc import client
    from .store.vault import open_vault

    state = open_vault(settings).state
    if not client.server_ready(state):
        return None
    try:
        return client.call(state, "write", request(op, args, agent=settings.agent_id, lock_timeout=settings.lock_timeout),
                           timeout=settings.lock_timeout + SERVER_MARGIN_S)
    except client.ServerUnavailable as e:
        if not e.sent:
            return None
        raise unconfirmed(op, e.message) from None
    except UsageError as e:
        if e.message.startswith("unknown op"):
            return None  # a server from before writes went through it
        raise
