"""Client of the per-vault server (``hive-brain serve``): newline-delimited JSON over a Unix socket.

The prompt hook imports this module, and its whole process has about 60 ms, so only the standard
library (and the tiny :mod:`hive_brain.errors`) is imported at module level; ``hashlib``,
``subprocess`` and ``sys`` are imported where they are needed.

Protocol (one JSON object per line, both ways; a connection may carry several requests)::

    -> {"op": "recall", "args": {"query": "...", "agent": "claude-code", "limit": 5}}
    <- {"ok": true, "result": {...}}
    <- {"ok": false, "error": {"type": "UsageError", "message": "...", "hint": "..."}}

Every failure to get an answer in time (no server, stale socket, hung server, server still
starting, internal server error) raises :class:`ServerUnavailable`, so a caller has exactly one
exception to catch before falling back to in-process work. Errors the core raised on purpose
(``UsageError``, ``NotFound``, ...) are re-raised as the same class.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .. import errors
from ..errors import HiveBrainError
from ..store.lock import pid_alive
from .wire import MAX_LINE, READY_NAME, NotSent, exchange, ready, usable  # noqa: F401 - READY_NAME: the server and tests read it here
from .wire import socket_path as _socket_path

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook's process imports this module
if TYPE_CHECKING:
    from typing import Any

    from ..config import Settings

INFO_NAME = "server.json"
LOCK_NAME = "server.lock"
LOG_NAME = "server.log"
# Requests are questions and single memory writes; the server refuses a longer request line (and
# closes that connection), so a caller with more does that work in-process instead.
MAX_REQUEST = 8 * 1024 * 1024


class ServerUnavailable(HiveBrainError):
    """No server answered in time; the caller should do the work in-process.

    ``sent`` is true when the request had reached the server before the answer failed: a read may
    simply be asked again, a write may already have been applied."""

    sent = False

    def __init__(self, message: str = "the hive-brain server is not running for this vault", *,
                 hint: str | None = "start it with `hive-brain serve --detach`") -> None:
        super().__init__(message, hint=hint)


class ServerNotReady(ServerUnavailable):
    """The server is up but still building its first index view."""


class WritesRefused(ServerUnavailable):
    """The server does not take writes (enforcement mode): the caller writes in-process, where its
    identity is checked."""


class InProcessOnly(ServerUnavailable):
    """The server does not answer this for a caller it cannot identify (enforcement mode): the
    caller does it in-process, where its identity is checked."""


class ServerError(ServerUnavailable):
    """The server failed on an unexpected error (a bug); in-process work may still succeed."""


def encode_line(obj: Any) -> bytes:
    """One protocol line (both ways). Text that cannot be UTF-8 (a lone surrogate, e.g. from invalid
    UTF-8 in argv) goes as a JSON escape, so the other side answers it instead of the line failing."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, default=str).encode("ascii") + b"\n"


def fallback_socket_dir() -> Path:
    from .wire import fallback_socket_dir as folder

    return Path(folder())


def socket_path(state_dir: Path | str) -> Path:
    """Where the server of the vault whose per-device state dir is `state_dir` listens
    (:func:`.wire.socket_path`)."""
    return Path(_socket_path(os.fspath(state_dir)))


def _error_from(payload: Any) -> HiveBrainError:
    """The server's error as the class it raised, with its data (``HiveBrainError.from_dict``)."""
    if not isinstance(payload, dict):
        return ServerError(f"the server sent a malformed error: {payload!r}"[:300])
    kind = str(payload.get("error") or payload.get("type") or "")
    if kind and kind not in HiveBrainError.registry and kind != "HiveBrainError":
        # Not one of ours (InternalError: a bug in the server): it failed while doing the work.
        err = ServerError(f"server error ({kind}): {payload.get('message') or 'the server reported an error'}",
                          hint=payload.get("hint"))
        err.sent = True
        return err
    return HiveBrainError.from_dict({**payload, "error": kind or "HiveBrainError"})


def call(state_dir: Path | str, op: str, args: dict[str, Any] | None = None, *, timeout: float) -> Any:
    """Send one request and return its result; the whole exchange finishes within `timeout` seconds."""
    deadline = time.monotonic() + max(0.0, timeout)
    path = socket_path(state_dir)
    if not usable(os.fspath(path)):
        raise ServerUnavailable()
    try:
        request = encode_line({"op": op, "args": args or {}})
    except (TypeError, ValueError) as e:
        raise errors.UsageError(f"request arguments are not JSON-serialisable: {e}") from e
    if len(request) > MAX_REQUEST:
        raise ServerUnavailable(f"the request is over {MAX_REQUEST:,} bytes, more than the server takes",
                                hint="done in-process instead")
    try:
        line = exchange(os.fspath(path), request, deadline, max_line=MAX_LINE)
    except NotSent as e:  # no socket file, nobody listening
        raise ServerUnavailable(hint=f"{e}: start it with `hive-brain serve --detach`") from None
    except TimeoutError:
        err = ServerUnavailable(f"the hive-brain server did not answer {op!r} within {timeout:g}s",
                                hint="it may be busy or hung; `hive-brain serve --stop` and start it again")
        err.sent = True  # the server may have the request, even if sendall failed part-way
        raise err from None
    except OSError as e:  # connection reset
        err = ServerUnavailable(hint=f"{type(e).__name__}: start it with `hive-brain serve --detach`")
        err.sent = True
        raise err from None
    try:
        resp = json.loads(line)
    except ValueError:
        err = ServerError("the server sent a response that is not JSON")
        err.sent = True
        raise err from None
    if not isinstance(resp, dict):
        err = ServerError("the server sent a malformed response")
        err.sent = True
        raise err
    if resp.get("ok"):
        return resp.get("result")
    raise _error_from(resp.get("error"))


def server_ready(state_dir: Path | str) -> bool:
    """A ready server is there (:func:`.wire.ready`: the marker names a live pid): the test readers
    and writers make before they connect."""
    return ready(os.fspath(state_dir))


def read_info(state_dir: Path | str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(os.fspath(state_dir), INFO_NAME), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def server_info(state_dir: Path | str, *, ping_timeout: float = 0.3) -> dict[str, Any]:
    """{"running", "pid", "since", "socket", ...}: server.json plus a ping (cheap; never starts anything)."""
    info = read_info(state_dir) or {}
    pid = info.get("pid") if isinstance(info.get("pid"), int) else None
    out: dict[str, Any] = {"running": False, "pid": pid, "since": info.get("started"),
                           "socket": info.get("socket") or str(socket_path(state_dir))}
    # No server.json or a dead pid: skip the ping (a stale socket would only refuse it anyway).
    if not info or not pid_alive(pid):
        if info:
            out["stale"] = True
        out["pid"] = None if not info else pid
        return out
    try:
        pong = call(state_dir, "ping", timeout=ping_timeout)
    except ServerUnavailable as e:
        out["error"] = e.message
        return out
    out.update(running=True, pid=pong.get("pid", pid), ready=bool(pong.get("ready")),
               generation=pong.get("generation"))
    return out


def wait_ready(state_dir: Path | str, timeout: float, *, proc: Any = None) -> dict[str, Any]:
    """Poll ping until the server answers ready; raises ServerUnavailable when `timeout` passes."""
    deadline = time.monotonic() + timeout
    last: ServerUnavailable | None = None
    while True:
        try:
            pong = call(state_dir, "ping", timeout=min(1.0, max(0.05, deadline - time.monotonic())))
            if pong.get("ready"):
                return pong
        except ServerUnavailable as e:
            last = e
        if proc is not None and proc.poll() is not None and proc.returncode != 0:
            raise ServerUnavailable(f"`hive-brain serve` exited with code {proc.returncode}",
                                    hint=f"see {Path(state_dir) / LOG_NAME}")
        if time.monotonic() >= deadline:
            raise ServerUnavailable(f"the hive-brain server did not become ready within {timeout:g}s",
                                    hint=f"see {Path(state_dir) / LOG_NAME}" + (f" ({last.message})" if last else ""))
        time.sleep(0.05)


def spawn_server(vault_root: Path | str, state_dir: Path | str) -> Any:
    """Start `hive-brain serve` detached from this process (own session, output to server.log)."""
    import subprocess
    import sys

    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # The server serves every agent (each request names its own); an odd agent id in the spawner's
    # environment must not stop it from starting.
    env.pop("HIVE_AGENT_ID", None)
    # Nor does it hold anyone's proof of identity: it checks each request's own (store/identity.py).
    for proof in ("HIVE_AGENT_CREDENTIAL", "HIVE_BRAIN_OWNER_KEY"):
        env.pop(proof, None)
    log = open(state / LOG_NAME, "ab")  # noqa: SIM115 - handed to the child, closed right after
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "hive_brain", "--vault", os.fspath(vault_root), "serve"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True, close_fds=True,
            cwd=os.fspath(state),
        )
    finally:
        log.close()


AUTOSTART_MARKER = "server.autostart"
AUTOSTART_LOCK = "server.starting"
AUTOSTART_EVERY_S = 60.0


def start_in_background(vault_root: Path | str, state_dir: Path | str) -> bool:
    """Start the vault's server detached unless one is ready or starting; never waits for it. At most
    once a minute per vault, so a server that cannot start is not respawned on every command (its
    reason is in server.log). True if a server was started."""
    if server_ready(state_dir):
        return False
    info = read_info(state_dir)
    if info and pid_alive(info.get("pid") if isinstance(info.get("pid"), int) else None):
        return False  # starting: server.json is written as soon as it listens
    from ..store.fsutil import due
    from ..store.lock import FileLock

    # One starter: the marker's check-and-touch under a lock tried once, so hooks that find the
    # server down at the same moment (several sessions after a reboot) start one server, not one each.
    starter = FileLock(Path(state_dir) / AUTOSTART_LOCK)
    try:
        if not starter.acquire(0, command="autostart"):
            return False  # another process is starting it this very moment
    except OSError:
        return False
    try:
        if not due(Path(state_dir) / AUTOSTART_MARKER, AUTOSTART_EVERY_S):
            return False
        try:
            spawn_server(vault_root, state_dir)
        except OSError:
            return False
        return True
    finally:
        starter.release()


def autostart(settings: Settings) -> bool:
    """:func:`start_in_background` for the vault of ``settings``, unless the user turned it off
    (``autostart = false`` / ``HIVE_BRAIN_AUTOSTART=0``) or does not use a server at all."""
    if not (settings.autostart and settings.use_server):
        return False
    from ..store.vault import open_vault

    v = open_vault(settings)
    return start_in_background(v.root, v.state)


def ensure_server(settings_or_state_dir: Settings | str | os.PathLike[str], vault_root: Path | str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Make sure the vault's server is running and ready (starting it detached if needed); returns
    its ping answer. Pass either a ``Settings`` (the vault is opened from it) or the vault's state dir
    together with `vault_root`."""
    if isinstance(settings_or_state_dir, str | os.PathLike):
        state = Path(settings_or_state_dir)
        if vault_root is None:
            raise errors.UsageError("ensure_server needs the vault root when given a state dir")
    else:
        from ..store.vault import open_vault

        v = open_vault(settings_or_state_dir)
        state, vault_root = v.state, vault_root or v.root
    try:
        pong = call(state, "ping", timeout=min(0.5, timeout))
        if pong.get("ready"):
            return pong
        return wait_ready(state, timeout)
    except ServerUnavailable:
        pass
    proc = spawn_server(vault_root, state)
    try:
        return wait_ready(state, timeout, proc=proc)
    except ServerUnavailable:
        # Lost a start race: another client's server won the lock and ours exited; that one counts.
        if proc.poll() is not None:
            return wait_ready(state, max(1.0, timeout / 2))
        raise
