"""`hive-brain repair-conflicts`: one current head per memory key and per id, nothing deleted.

What it does with each conflict :mod:`.conflicts` finds (dry run unless confirmed):

* ``resurrected``: the note gets back the ``status: superseded`` (and ``superseded_by``) its chain
  already gives it;
* ``duplicateId``: the head keeps the id (the newest by ``updated``, then the original file name:
  the rule of :meth:`Catalog.derive`, so recall already showed that one); every copy gets an id of its
  own, ``status: superseded``, ``superseded_by`` and ``conflict_of`` naming the head;
* ``duplicateKey``: the newest by ``updated`` (then ``created``, then path) stays current; the
  others become ``superseded`` by it, with ``conflict_of``.

The head lists every note set aside for it in ``conflict_versions``; those notes stay where they
are, readable, found by history questions ("what did we use before ...") and by `get`. Every change
is one unit of work (:meth:`MemoryStore.transaction`): one journaled commit, one index generation.
Notes held by git conflict markers and sync copies of plain notes are listed for a person.
"""

from __future__ import annotations

import difflib
from typing import Any

from ..store.catalog import Entry
from ..store.notes import derived_memory_id, now_iso, render, wikilink
from .conflicts import REPAIRABLE, find
from .layers import require_owner
from .ports import EngineLike

DIFF_LINES = 80  # per pair in the report; the notes themselves stay readable in full


def _side(e: Entry) -> dict[str, Any]:
    return {"id": e.id, "path": e.path, "status": e.status, "updated": str(e.meta.get("updated") or "") or None}


class _Plan:
    """Frontmatter edits per note, and the pairs they come from (for the report)."""

    def __init__(self, engine: EngineLike) -> None:
        self.engine = engine
        self.edits: dict[str, tuple[Entry, dict[str, Any], list[str]]] = {}
        self.pairs: list[dict[str, Any]] = []

    def _edit(self, e: Entry) -> tuple[dict[str, Any], list[str]]:
        if e.path not in self.edits:
            self.edits[e.path] = (e, {}, [])
        _, changes, versions = self.edits[e.path]
        return changes, versions

    def set_aside(self, kind: str, head: Entry, loser: Entry, *, new_id: str | None = None) -> None:
        """``loser`` becomes a superseded version that names ``head``; ``head`` lists it."""
        changes, _ = self._edit(loser)
        changes.update(status="superseded", superseded_by=wikilink(head.path, head.id),
                       conflict_of=wikilink(head.path, head.id))
        if new_id:
            # A copy repeats the head's place in its chain; as a copy it supersedes nothing itself.
            changes.update(id=new_id, supersedes=None)
        self._edit(head)[1].append(new_id or loser.id)
        self._pair(kind, head, loser, {"newId": new_id} if new_id else {})

    def restore_status(self, e: Entry) -> None:
        head = self.engine.catalog.by_id(e.next_id)
        changes, _ = self._edit(e)
        newer = str(e.meta.get("superseded_by") or e.next_id)
        link = wikilink(head.path, head.id) if head is not None and head.id == newer else newer
        changes.update(status="superseded", superseded_by=link)
        if head is not None:
            self._pair("resurrected", head, e, {})

    def _pair(self, kind: str, head: Entry, loser: Entry, extra: dict[str, Any]) -> None:
        self.pairs.append({"kind": kind, "keep": _side(head), "setAside": _side(loser), **extra,
                           "diff": self._diff(head, loser)})

    def _diff(self, head: Entry, loser: Entry) -> str:
        def text(e: Entry) -> list[str]:
            try:
                return self.engine.vault.abs(e.path).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                return []

        lines = list(difflib.unified_diff(text(head), text(loser), f"keep: {head.path}", f"set aside: {loser.path}",
                                          n=1, lineterm=""))
        more = len(lines) - DIFF_LINES
        return "\n".join(lines[:DIFF_LINES] + ([f"... {more} more lines"] if more > 0 else []))


def _plan(engine: EngineLike, found: list[dict[str, Any]]) -> _Plan:
    cat = engine.catalog
    plan = _Plan(engine)
    taken = {r[0] for r in cat.db.execute("SELECT id FROM notes WHERE id != ''")}
    for c in found:
        if c["kind"] == "resurrected":
            e = cat.by_paths([c["path"]]).get(c["path"])
            if e is not None:
                plan.restore_status(e)
        elif c["kind"] == "duplicateId":
            head = cat.by_paths([c["path"]]).get(c["path"])
            copies = cat.by_paths([x["path"] for x in c["copies"]])
            for x in c["copies"]:
                copy = copies.get(x["path"])
                if head is None or copy is None:
                    continue
                # Derived from the notes, not drawn at random: two devices holding the same copies
                # (a sync delivered them to both) plan, and write, the same repair.
                seed = f"hive-brain/conflict-copy/{head.id}/{copy.path}/{copy.sha}"
                new_id, n = derived_memory_id(seed), 0
                while new_id in taken:
                    n += 1
                    new_id = derived_memory_id(f"{seed}/{n}")
                taken.add(new_id)
                plan.set_aside("duplicateId", head, copy, new_id=new_id)
        elif c["kind"] == "duplicateKey":
            group = cat.by_paths([c["path"], *(x["path"] for x in c["others"])])
            head = group.get(c["path"])
            for x in c["others"]:
                other = group.get(x["path"])
                if head is not None and other is not None:
                    plan.set_aside("duplicateKey", head, other)
    return plan


def _stage(tx: Any, plan: _Plan) -> None:
    # The newest `updated` among the notes repaired, not the clock: a repair changes no content, and two
    # devices repairing the same notes (before their next sync) then write the same bytes.
    ts = max((str(e.meta.get("updated") or "") for e, _c, _v in plan.edits.values()), default="") or now_iso()
    for e, changes, versions in plan.edits.values():
        note = tx.load(e)
        meta = dict(note.meta)
        meta.update(changes)
        if versions:
            have = [str(v) for v in (meta.get("conflict_versions") or [])]
            meta["conflict_versions"] = have + [v for v in versions if v not in have]
        meta["updated"] = ts
        tx.write(e.path, render(meta, note.body, like=note), expect_old=e.sha)


def repair_conflicts(engine: EngineLike, *, confirm: bool = False) -> dict[str, Any]:
    """Show (and with ``confirm``, fix in one transaction) the sync conflicts the caller may open."""
    settings = engine.settings
    require_owner(settings, "repairing sync conflicts")
    agent = settings.agent_id
    store = engine.memory
    if not confirm:
        engine.catalog.refresh()
        found = find(engine.catalog, agent)
        plan = _plan(engine, [c for c in found if c["kind"] in REPAIRABLE])
        changed: list[str] = []
    else:
        with store.transaction("repair-conflicts") as tx:  # the catalog is refreshed under the lock
            found = find(engine.catalog, agent)
            plan = _plan(engine, [c for c in found if c["kind"] in REPAIRABLE])
            _stage(tx, plan)
            changed = list(tx.paths)
    manual = [c for c in found if c["kind"] not in REPAIRABLE]
    res: dict[str, Any] = {
        "dryRun": not confirm,
        "conflicts": len(found),
        "pairs": plan.pairs,
        "manual": manual,
        "notesToChange": sorted(plan.edits),
        "changed": changed,
        "generation": engine.indexer.gens.current_id(),
    }
    if confirm:
        res["remaining"] = len(find(engine.catalog, agent))
        if store.publish_error:
            res["indexWarning"] = f"saved, but the index did not update ({store.publish_error}); it catches up on the next read"
    return res
