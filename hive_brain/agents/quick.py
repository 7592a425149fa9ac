"""The prompt hook's fast path: one request to a ready server, from a process that imports almost nothing.

Measured on the 10k-note vault (benchmarks/hook_latency.py, quiet machine): of the hook process's own
~35 ms CPU, ``python -S`` itself is ~9 ms and ``import json, socket`` alone ~14 ms (``re``, ``enum``,
``selectors`` behind them), then ``pathlib``, ``threading`` and our modules. Here the same answer is
had with C modules only (``_json``'s scanner and encoder, ``_socket``) and :func:`.config.values`,
which reads settings without ``pathlib``, ``re`` or ``tomllib``.

It answers only the common case: a prompt event in Claude Code's envelope, a vault named by env or
config, no enforcement mode, a ready server that answers in time. Anything else (no server, a server
error, an odd payload, another format, ``--agent``/``--vault`` flags) raises :class:`Fallback` before
anything is printed, and :func:`.hooks.dispatch` does the whole work as before, told when the server already
failed so it does not wait for it twice. The server-side work is the same ``prompt`` op either way.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing for the type checker only
if TYPE_CHECKING:
    from typing import Any

STATUS_FILE = "status.json"
STATUS_KEEP = 30
LOCAL_RESERVE_S = 0.5  # of the deadline, kept for the lexical answer when the server fails (hooks reads it too)
# Keys a status file written before the camelCase rename (docs/json.md) may still hold.
OLD_STATUS_KEYS = {"duration_ms": "durationMs", "server_error": "serverError", "last_error": "lastError"}


def local_reserve(deadline_s: float) -> float:
    """The part of the hook's one deadline kept for the in-process lexical answer when the server does
    not answer in its share: at least LOCAL_RESERVE_S, a third of a longer deadline (a loaded machine
    slows the lexical answer as much as the server)."""
    return max(LOCAL_RESERVE_S, deadline_s / 3.0)


class Fallback(Exception):
    """The fast path does not answer this prompt; ``server_error`` is set when the server was asked and
    failed (the full path then goes straight to its in-process answer)."""

    def __init__(self, why: str, server_error: str | None = None) -> None:
        super().__init__(why)
        self.server_error = server_error


# ---------------------------------------------------------------------------------------------- JSON
class _Ctx:
    """What ``_json.make_scanner`` reads off ``json.JSONDecoder``: the defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict[str, str] = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


_scan: Any = None
_encode: Any = None


def loads(text: str) -> Any:
    """``json.loads`` for one document, on ``_json``'s C scanner (ValueError on anything invalid)."""
    global _scan
    if _scan is None:
        import _json

        _scan = _json.make_scanner(_Ctx)  # type: ignore[arg-type]  # duck-typed: it reads these attributes
    ws = " \t\n\r"
    i, n = 0, len(text)
    while i < n and text[i] in ws:
        i += 1
    try:
        obj, end = _scan(text, i)
    except StopIteration as e:
        raise ValueError(f"not JSON at {e.value}") from None
    finally:
        _Ctx.memo.clear()
    while end < n and text[end] in ws:
        end += 1
    if end != n:
        raise ValueError(f"extra data at {end}")
    return obj


def dumps(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`` on ``_json``'s C encoder."""
    global _encode
    if _encode is None:
        import _json

        def default(o: Any) -> Any:
            raise TypeError(f"{type(o).__name__} is not JSON serialisable")

        _encode = _json.make_encoder({}, default, _json.encode_basestring, None, ":", ",", False, False, True)
    return "".join(_encode(obj, 0))


def pretty(obj: Any, level: int = 0) -> str:
    """``json.dumps(obj, indent=2, ensure_ascii=False, default=str)`` (what the CLI's ``--json`` prints)
    without the json module, whose import (re behind it) was a quarter of the thin client's process:
    the layout here, every scalar through the C encoder, so each prints exactly as json prints it."""
    if isinstance(obj, dict | list | tuple):
        if not obj:
            return "{}" if isinstance(obj, dict) else "[]"
        pad = "\n" + "  " * (level + 1)
        if isinstance(obj, dict):
            parts = [(dumps(k) if isinstance(k, str) else dumps(dumps(k))) + ": " + pretty(v, level + 1)
                     for k, v in obj.items()]
            return "{" + pad + ("," + pad).join(parts) + "\n" + "  " * level + "}"
        return "[" + pad + ("," + pad).join(pretty(v, level + 1) for v in obj) + "\n" + "  " * level + "]"
    if obj is None or isinstance(obj, str | int | float):
        return dumps(obj)
    return dumps(str(obj))  # default=str


# ---------------------------------------------------------------------------------------------- the status file
def upgrade_status(data: dict) -> dict:
    """Rename the snake_case keys of an older status file, so an upgrade keeps the last status."""

    def fix(d: Any) -> Any:
        if not isinstance(d, dict):
            return d
        # An old key is renamed; dropped if the file somehow holds both (the new one wins).
        return {OLD_STATUS_KEYS.get(k, k): v for k, v in d.items() if not (k in OLD_STATUS_KEYS and OLD_STATUS_KEYS[k] in d)}

    data = fix(data)
    if isinstance(data.get("runs"), list):
        data["runs"] = [fix(r) for r in data["runs"]]
    if isinstance(data.get("last"), dict):
        data["last"] = {k: fix(r) for k, r in data["last"].items()}
    if isinstance(data.get("lastError"), dict):
        data["lastError"] = fix(data["lastError"])
    return data


def load_status(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        data = loads(f.read())
    return upgrade_status(data) if isinstance(data, dict) else {}


def record(folder: str, rec: dict) -> None:
    """Keep the last runs in a small state file (atomic rename; not memory, so no fsync on the hot path)."""
    try:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, STATUS_FILE)
        try:
            data = load_status(path)
        except (OSError, ValueError):
            data = {}
        rec = {k: v for k, v in rec.items() if v is not None}
        runs = [r for r in data.get("runs", []) if isinstance(r, dict)][-(STATUS_KEEP - 1):] + [rec]
        data["runs"] = runs
        data.setdefault("last", {})[rec["event"]] = rec
        if not rec.get("ok"):
            data["lastError"] = rec
        tmp = os.path.join(folder, f".{STATUS_FILE}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(dumps(data))
        os.replace(tmp, path)
    except (OSError, ValueError, TypeError):
        pass  # status is a convenience; failing to record must not fail the hook


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# ---------------------------------------------------------------------------------------------- the prompt
def _clean(text: str) -> bool:
    """No NUL and no lone surrogate (the full path's ``clean_json`` would change such a payload).
    ``encode`` finds a surrogate in C: a pasted 100 KB log is a prompt too."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def find_vault(cwd: str) -> str | None:
    """The nearest vault at or above ``cwd`` (``store.vault.find_root``, in os calls only)."""
    cur = os.path.realpath(cwd)
    while True:
        if os.path.isfile(os.path.join(cur, ".hive-brain", "vault.json")):
            return cur
        up = os.path.dirname(cur)
        if up == cur:
            return None
        cur = up


def _vault_state(vault: str, state_dir: str) -> str:
    """The vault's per-device state dir, as ``store.vault.open_vault`` derives it."""
    root = os.path.realpath(os.path.expanduser(vault))
    try:
        with open(os.path.join(root, ".hive-brain", "vault.json"), encoding="utf-8") as f:
            vid = loads(f.read())["vault_id"]
    except (OSError, ValueError, KeyError, TypeError):
        raise Fallback("no readable vault marker") from None
    if not isinstance(vid, str) or not vid.replace("-", "").isalnum():
        raise Fallback("invalid vault id")
    return os.path.join(os.path.realpath(os.path.expanduser(state_dir)), vid)


def _ask(state: str, request: bytes, deadline: float) -> dict:
    """One request to the vault's server (:mod:`..rpc.wire`, as ``rpc.client.call``); the ``prompt`` op's result."""
    from ..rpc import wire

    if not wire.ready(state):
        raise Fallback("the server is not ready")
    path = wire.socket_path(state)
    if not wire.usable(path):
        raise Fallback("a socket folder that is not ours alone")
    try:
        line = wire.exchange(path, request, deadline, max_line=wire.MAX_LINE)
    except wire.NotSent:
        raise Fallback("no server listening") from None
    except OSError as e:  # TimeoutError too
        why = "no answer in time" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
        raise Fallback(why, server_error=f"ServerUnavailable: {why}") from None
    try:
        reply = loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Fallback("unreadable answer", server_error="ServerError: the server's prompt answer is malformed") from None
    if not isinstance(reply, dict) or not reply.get("ok") or not isinstance(reply.get("result"), dict):
        err = reply.get("error") if isinstance(reply, dict) else None
        msg = err.get("message") if isinstance(err, dict) else None
        # An older server without the op: the full path asks it for recalls instead.
        raise Fallback(f"the server refused: {msg}", server_error=None if msg and "unknown op" in str(msg) else
                       f"ServerError: {msg}")
    res = reply["result"]
    if not isinstance(res.get("mode"), str):
        raise Fallback("malformed answer", server_error="ServerError: the server's prompt answer is malformed")
    return res


def answer(stdin: str, t0: float) -> int:
    """Answer the prompt hook from the server (prints the hook's JSON, records its status); raises
    :class:`Fallback` when the full path must do it."""
    from .. import config
    from ..search.prompt import PROMPT_CHARS

    try:
        payload = loads(stdin) if stdin.strip() else {}
    except ValueError:
        raise Fallback("not JSON") from None
    if not isinstance(payload, dict):
        raise Fallback("not an object")
    prompt = payload.get("prompt") or payload.get("user_prompt") or ""
    tp = payload.get("transcript_path")
    sid = payload.get("session_id")
    name = payload.get("hook_event_name") or "UserPromptSubmit"
    if not isinstance(prompt, str) or not isinstance(tp, str | None) or not isinstance(name, str):
        raise Fallback("odd payload")
    prompt = prompt.strip()
    if not prompt or prompt.startswith("/") or not _clean(prompt + (tp or "") + name + str(sid or "")):
        raise Fallback("a prompt the full path skips or cleans")
    got, src = config.values(("vault", "state_dir", "agent_id", "use_server", "hook_deadline", "hook_budget_chars",
                              "scoped_permissions"))
    if not got.get("vault") or not got.get("use_server", True) or got.get("scoped_permissions"):
        raise Fallback("settings")
    if str(src.get("vault", "")).startswith("config:") and find_vault(os.getcwd()) is not None:
        raise Fallback("the current folder is in a vault")  # which wins over the config file's (open_vault)
    agent = got.get("agent_id")
    if agent is None:
        raise Fallback("no agent id")  # the full path derives it from the payload
    agent = config.validate_agent_id(agent)
    deadline_s = float(got.get("hook_deadline", config.default("hook_deadline")))
    deadline = t0 + deadline_s
    budget = max(500, int(got.get("hook_budget_chars", config.default("hook_budget_chars"))))
    state_dir = got.get("state_dir") or config.data_dir()
    os.umask(0o077)  # state is the owner's alone (store.vault.secure_state): the status file below
    state = _vault_state(got["vault"], state_dir)
    request = dumps({"op": "prompt", "args": {"prompt": prompt[:PROMPT_CHARS], "context": None, "transcript_path": tp,
                                              "budget": budget, "agent": agent}}).encode("utf-8") + b"\n"
    res = _ask(state, request, deadline - local_reserve(deadline_s))
    rec: dict[str, Any] = {"time": now_iso(), "event": "prompt", "ok": True, "mode": res["mode"],
                           "session_id": str(sid or "")[:80] or None, "agent": agent,
                           "items": len(res.get("items") or [])}
    timing = res.get("timing")
    if isinstance(timing, dict) and "opMs" in timing:
        rec["serverMs"] = timing["opMs"]
    out: dict | None
    if res.get("abstained") or not res.get("context"):
        out = {"systemMessage": res["notice"]} if res.get("notice") else None
    else:
        out = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": res["context"]}}
    rec["durationMs"] = round((time.monotonic() - t0) * 1000, 1)
    record(os.path.join(os.path.expanduser(state_dir), "hooks"), rec)
    if out:
        try:
            sys.stdout.write(dumps(out) + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # the agent closed the pipe; nothing to tell it anymore
    return 0
