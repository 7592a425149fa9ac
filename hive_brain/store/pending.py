"""Durable pending writes: a write that could not take the vault lock in time is kept here, not lost.

The spec's promise: "if the write cannot finish, it stays pending and the command says so". One file
per write under ``<state>/pending-writes/`` (``<id>.json``, written atomically and fsynced with its
directory before the command reports "pending"), so it survives kill -9 of the writer right after.
The next writer (or the server) applies queued writes in id order, under the lock, before its own.

A record: ``{"id", "op", "args", "agent", "created", "pid", "reason", "state"}``, ``state`` being
``queued`` or ``failed`` (applied, but refused then: kept with its ``error`` for ``status``, since
nothing is dropped; stored as ``<id>.failed`` so the write path's check skips them). A record that
cannot be read is moved aside as ``<id>.json.damaged-<time>`` and reported by status/doctor. Applied writes are removed and a line is appended to ``applied.jsonl``.
This module only stores records; what an op means is up to the memory layer that replays it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .fsutil import atomic_write_text, fsync_dir, quarantine
from .notes import new_ulid

DIR_NAME = "pending-writes"
APPLIED_LOG = "applied.jsonl"
APPLIED_LOG_MAX = 1 << 20  # the log is informational; cut to its second half past this


_KEPT = "kept for you to look at (not applied)"


def pending_dir(state_dir: Path) -> Path:
    return Path(state_dir) / DIR_NAME


def add(state_dir: Path, op: str, args: dict[str, Any], *, agent: str | None, reason: str) -> dict[str, Any]:
    """Store one write durably; returns the record (its ``id`` is what the command reports)."""
    d = pending_dir(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    rec = {"id": "pw-" + new_ulid().lower(), "op": op, "args": args, "agent": agent,
           "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid(), "reason": reason, "state": "queued"}
    atomic_write_text(d / f"{rec['id']}.json", json.dumps(rec, ensure_ascii=False))  # fsyncs file and dir
    return rec


def _records(state_dir: Path) -> list[dict[str, Any]]:
    d = pending_dir(state_dir)
    try:
        names = sorted(n for n in os.listdir(d) if n.startswith("pw-") and n.endswith((".json", ".failed")))
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        try:
            rec = json.loads((d / n).read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue  # applied by someone else meanwhile
        except (OSError, ValueError) as e:
            # atomic_write_text never leaves a torn record: this one was damaged after. Moved aside
            # (kept byte for byte, listed by status/doctor as damaged), never deleted, never retried.
            quarantine(d / n, f"unreadable pending write: {e}", fate=_KEPT)
            continue
        if not isinstance(rec, dict):
            quarantine(d / n, "a pending write that is not a JSON object", fate=_KEPT)
            continue
        out.append(rec)
    return out


def has_queued(state_dir: Path) -> bool:
    """Cheap check for the write path (one listdir; no directory, no cost)."""
    try:
        return any(n.startswith("pw-") and n.endswith(".json") for n in os.listdir(pending_dir(state_dir)))
    except FileNotFoundError:
        return False


def queued(state_dir: Path) -> list[dict[str, Any]]:
    """Records still to apply, oldest first."""
    return [r for r in _records(state_dir) if r.get("state") == "queued" and r.get("op")]


def list_pending(state_dir: Path) -> list[dict[str, Any]]:
    """Every kept record (queued and failed), oldest first, for ``status``; args are summarised."""
    out = []
    for r in _records(state_dir):
        args = r.get("args") or {}
        given = args.get("inp")
        inp: dict[str, Any] = given if isinstance(given, dict) else {}
        what = inp.get("title") or args.get("memory_id") or (f"{len(args['records'])} records" if "records" in args else "")
        out.append({"id": r.get("id"), "op": r.get("op"), "state": r.get("state"), "created": r.get("created"),
                    "agent": r.get("agent"), "what": what, "error": r.get("error")})
    return out


def done(state_dir: Path, rec: dict[str, Any], result: dict[str, Any]) -> None:
    """The write is applied: drop its record (fsynced) and log what became of it."""
    d = pending_dir(state_dir)
    log = d / APPLIED_LOG
    line = json.dumps({"id": rec["id"], "op": rec.get("op"), "applied": time.strftime("%Y-%m-%dT%H:%M:%S"),
                       "result": {k: result.get(k) for k in ("status", "id", "path", "note") if k in result}})
    try:
        if log.exists() and log.stat().st_size > APPLIED_LOG_MAX:
            data = log.read_bytes()
            atomic_write_text(log, data[len(data) // 2:].split(b"\n", 1)[-1].decode("utf-8", "replace"))
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError:
        pass  # informational only
    (d / f"{rec['id']}.json").unlink(missing_ok=True)
    fsync_dir(d)


def failed(state_dir: Path, rec: dict[str, Any], error: str) -> None:
    """Applying the write was refused (e.g. its key got taken meanwhile): keep it, say why."""
    d = pending_dir(state_dir)
    rec = {**rec, "state": "failed", "error": error, "failed_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_text(d / f"{rec['id']}.failed", json.dumps(rec, ensure_ascii=False))
    (d / f"{rec['id']}.json").unlink(missing_ok=True)
    fsync_dir(d)
