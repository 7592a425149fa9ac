"""Deletions this device made, so that it is told when a sync brings one of them back.

A sync engine meeting a deletion on one device and an update on the other keeps the update (git's
modify/delete merge keeps the changed note; Syncthing restores a changed file over a deletion): the
memory stays, nothing is lost, but the device that deleted it would never know it is back. So each
``delete`` appends a record to ``<state>/deletions.jsonl``, a per-device bounded log outside the vault
(:mod:`..store.oplog`; the other device never deleted anything, and must not be told it did): the id,
path and title, the note's SHA-256 and ``updated`` as deleted, when, and by whom.

``doctor`` (``cameBack``) and ``conflicts`` (kind ``deletedCameBack``) name every memory whose latest
record is a deletion and whose id is in the vault again, until it is deleted again (the id is gone)
or kept (``doctor --keep ID`` appends a ``kept`` record). A record that aged out of the log (two files
of 8 MB: tens of thousands of deletions) is not named any more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import HiveBrainError, NotFound
from ..store.catalog import Catalog, Entry
from ..store.ids import now_iso
from ..store.oplog import EventLog
from .layers import may_open

DELETIONS_FILE = "deletions.jsonl"


def deletion_log(state: Path) -> EventLog:
    return EventLog(Path(state) / DELETIONS_FILE)


def record_deletion(state: Path, e: Entry, agent: str | None) -> None:
    """After a delete committed. A receipt, not memory: a log it cannot write (a full disk, a lock held
    past the wait) does not undo or fail the delete, it only means this one is never named."""
    rec = {"event": "deleted", "id": e.id, "path": e.path, "title": e.title, "sha": e.sha,
           "updated": str(e.meta.get("updated") or "") or None, "at": now_iso(), "agent": agent or None}
    try:
        deletion_log(state).append(rec)
    except (OSError, HiveBrainError):
        pass


def _latest(state: Path) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for rec in deletion_log(state).read():
        if isinstance(rec.get("id"), str) and rec.get("event") in ("deleted", "kept"):
            latest[rec["id"]] = rec
    return latest


def came_back(state: Path, catalog: Catalog, agent: str | None = None) -> list[dict[str, Any]]:
    """Memories deleted on this device that are in the vault again (those ``agent`` may open; the
    owner: all), by path."""
    out = []
    for mid, rec in _latest(state).items():
        if rec["event"] != "deleted":
            continue
        e = catalog.by_id(mid)
        if e is None or e.kind != "memory" or not (agent is None or may_open(e, agent)):
            continue
        changed = e.sha != rec.get("sha")
        how = "updated by a sync" if changed else "unchanged (a sync or an undo restored it)"
        day = str(rec.get("at") or "")[:10] or "an unknown day"
        out.append({"id": mid, "path": e.path, "title": e.title, "status": e.status, "changed": changed,
                    "deletedAt": rec.get("at"), "deletedBy": rec.get("agent"),
                    "updated": str(e.meta.get("updated") or "") or None,
                    "reason": f"{mid} ({e.title}) you deleted here on {day} came back {how}; delete it again "
                              f"(`hive-brain delete {mid} --confirm`) or keep it (`hive-brain doctor --keep {mid}`)"})
    return sorted(out, key=lambda x: x["path"])


def keep(state: Path, catalog: Catalog, ids: list[str], agent: str | None = None) -> list[str]:
    """Record that each of ``ids``, which came back, is kept: it is not named again (unless deleted
    and brought back once more). An id that did not come back is refused, naming it."""
    back = {x["id"] for x in came_back(state, catalog, agent)}
    unknown = [i for i in ids if i not in back]
    if unknown:
        raise NotFound(f"{', '.join(unknown)}: not a memory deleted here that came back",
                       hint="`hive-brain doctor` lists the ones that did (cameBack)")
    log = deletion_log(state)
    for mid in ids:
        log.append({"event": "kept", "id": mid, "at": now_iso(), "agent": agent or None})
    return list(ids)
