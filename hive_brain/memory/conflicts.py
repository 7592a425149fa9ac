"""Sync conflicts: what two devices (or a sync tool, or an undo) left that is not one memory per id
and one current version per key. Found from the catalog's derived columns (:meth:`Catalog.derive`),
so finding them reads no note.

Kinds (``kind`` of each record):

* ``resurrected``: a note says ``status: active`` but a newer version names it in ``supersedes``
  (a sync or an undo restored it); it is treated as superseded already, the frontmatter is stale;
* ``duplicateId``: several notes carry one id (Obsidian "Make a copy", a Syncthing/Dropbox/iCloud/
  Obsidian Sync conflict copy); recall shows the head once and lists the copies;
* ``duplicateKey``: several current memories of one scope share a ``memory_key`` (two devices
  wrote or evolved the same thing offline);
* ``syncCopy``: a note that is not a memory, named like a Syncthing or "conflicted copy" of another
  note that still exists (nothing to merge automatically: compare them and delete one by hand);
* ``gitMarkers``: a note holding an unresolved git merge (resolve it by hand).

`repair-conflicts` (:mod:`.repair`) fixes the first three; the last two are reported for a person.
"""

from __future__ import annotations

from typing import Any

from ..store.catalog import GIT_MARKERS, Catalog, Entry
from ..store.copies import copy_kind, original_of
from ..store.notes import path_id
from .layers import may_open

REPAIRABLE = ("resurrected", "duplicateId", "duplicateKey")


def _brief(e: Entry) -> dict[str, Any]:
    return {"id": e.id, "path": e.path, "status": e.status, "updated": str(e.meta.get("updated") or "") or None}


def _repairable_by(e: Entry, agent: str | None) -> bool:
    """The owner (no id; in enforcement mode only a proved owner gets here without one) repairs the
    whole vault, as `doctor` lists every broken note to it; an agent, only what it may open."""
    return agent is None or may_open(e, agent)


def find(catalog: Catalog, agent: str | None = None) -> list[dict[str, Any]]:
    """Every sync conflict among the notes ``agent`` may open (the owner: all), grouped by kind."""
    out: list[dict[str, Any]] = []

    def visible(e: Entry) -> bool:
        return _repairable_by(e, agent)

    for e in catalog.select("kind = 'memory' AND copy_of = '' AND fm_status = 'active' AND status = 'superseded' "
                            "ORDER BY path"):
        if visible(e):
            out.append({"kind": "resurrected", "id": e.id, "path": e.path, "supersededBy": e.next_id,
                        "reason": f"{e.id} says it is active, but {e.next_id} replaced it; it counts as superseded"})
    for head in catalog.select("dups > 1 AND copy_of = '' ORDER BY path"):
        copies = [x for x in catalog.copies(head) if visible(x)]
        if visible(head) and copies:
            out.append({"kind": "duplicateId", "id": head.id, "path": head.path, "head": _brief(head),
                        "copies": [{**_brief(x), "copyKind": copy_kind(x.path)} for x in copies],
                        "reason": f"{len(copies) + 1} notes carry id {head.id}; {head.path} is the head"})
    for group in duplicate_keys(catalog, agent):
        head = group[0]
        out.append({"kind": "duplicateKey", "memoryKey": head.memory_key, "id": head.id, "path": head.path,
                    "head": _brief(head), "others": [_brief(x) for x in group[1:]],
                    "reason": f"{len(group)} current memories share key {head.memory_key!r}; the newest is {head.id}"})
    # Names first (no frontmatter loaded): a vault of 100k conversation notes has a handful of copies.
    # "Meeting 2.md" beside "Meeting.md" is as often a second meeting as a copy: a plain note counts
    # only under a name no person gives a note (a memory's copy is known by its id instead).
    # A memory whose id is derived from its path (made from the template, never written by hive-brain)
    # has no id in common with its copy either: it is known by its name, as a plain note.
    named = [p for (p, kind, mid) in catalog.db.execute("SELECT path, kind, id FROM notes WHERE dups = 1")
             if copy_kind(p) in ("syncthing", "conflicted-copy") and (kind != "memory" or mid == path_id(p))]
    for e in sorted(catalog.by_paths(named, with_meta=False).values(), key=lambda e: e.path):
        orig = original_of(e.path)
        if orig and visible(e) and catalog.by_paths([orig], with_meta=False):
            out.append({"kind": "syncCopy", "path": e.path, "original": orig, "copyKind": copy_kind(e.path),
                        "reason": f"{e.path} is a sync copy of {orig}; compare them and delete one by hand"})
    for e in catalog.select("flags = ? ORDER BY path", (GIT_MARKERS,)):
        if visible(e):
            out.append({"kind": "gitMarkers", "id": e.id or None, "path": e.path,
                        "reason": f"{e.path} holds an unresolved git merge (<<<<<<< ... >>>>>>>); resolve it by hand"})
    return out


def newest_first(entries: list[Entry]) -> list[Entry]:
    """The head of a set of versions first: newest ``updated`` (then ``created``), then the path."""
    return sorted(entries, key=lambda e: (str(e.meta.get("updated") or e.meta.get("created") or ""), e.path),
                  reverse=True)


def duplicate_keys(catalog: Catalog, agent: str | None = None) -> list[list[Entry]]:
    """Groups of current memories of one scope sharing a key, each newest first."""
    rows = catalog.db.execute(
        "SELECT memory_key, layer, agent, task FROM notes WHERE kind = 'memory' AND status = 'active' "
        "AND copy_of = '' AND memory_key != '' AND problem IS NULL "
        "GROUP BY memory_key, layer, agent, task HAVING COUNT(*) > 1 ORDER BY memory_key").fetchall()
    groups = []
    for key, layer, who, task in rows:
        group = catalog.select("kind = 'memory' AND status = 'active' AND copy_of = '' AND problem IS NULL "
                               "AND memory_key = ? AND layer = ? AND agent = ? AND task = ?", (key, layer, who, task))
        group = [e for e in group if _repairable_by(e, agent)]
        if len(group) > 1:
            groups.append(newest_first(group))
    return groups


def for_entry(catalog: Catalog, e: Entry, agent: str | None = None) -> list[dict[str, Any]]:
    """The conflicts that concern one memory (for `get`)."""
    out: list[dict[str, Any]] = []
    if e.fm_status == "active" and e.status == "superseded":
        out.append({"kind": "resurrected", "supersededBy": e.next_id,
                    "reason": f"the note says active, but {e.next_id} replaced it"})
    copies = [x.path for x in catalog.copies(e) if may_open(x, agent)]
    if copies:
        out.append({"kind": "duplicateId", "copies": copies, "reason": "other notes carry the same id"})
    if e.flags == GIT_MARKERS:
        out.append({"kind": "gitMarkers", "reason": "the note holds an unresolved git merge"})
    return out
