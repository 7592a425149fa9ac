"""Brain Review proposals as notes: their folder, ids, statuses, and staging a new one.

A proposal is an ordinary note under ``Operations/Brain Review/`` (so it syncs, and the owner can read
and edit it in Obsidian before approving): frontmatter ``id: rev-<ulid>``, ``kind`` (remember |
promotion | import | pattern), ``status`` (pending -> approved | rejected; approved -> applied |
rejected), ``proposed_by``, the proposed memory's fields, ``sources`` and ``reason``; the body is the
proposed content. Deciding and applying proposals is :mod:`.review`.
"""

from __future__ import annotations

from typing import Any

from ..errors import DuplicateContent, UsageError
from ..store.catalog import Catalog, Entry
from ..store.journal import Transaction
from ..store.notes import content_hash, derive_memory_key, memory_filename, new_ulid, now_iso, render
from ..store.vault import Vault
from .layers import SHARED
from .model import MemoryInput

REVIEW_DIR = "Operations/Brain Review"
KINDS = ("remember", "promotion", "import", "pattern")
STATUSES = ("pending", "approved", "rejected", "applied")
PROPOSAL_FIELDS = ("type", "title", "memory_key", "project", "tags", "aliases", "confidence")


def new_review_id() -> str:
    return "rev-" + new_ulid().lower()


def proposal_entries(catalog: Catalog, status: str | None = None) -> list[Entry]:
    prefix = REVIEW_DIR + "/"
    where = "substr(path, 1, ?) = ? AND id LIKE 'rev-%'"
    args: tuple = (len(prefix), prefix)
    if status:
        where += " AND status = ?"
        args += (status,)
    return sorted(catalog.select(where, args), key=lambda e: (str(e.meta.get("created") or ""), e.id))


def visible_to(e: Entry, agent: str | None) -> bool:
    # An agent sees what it proposed; promotions quote other agents' private memories, so only the owner.
    return not agent or str(e.meta.get("proposed_by") or "") == agent


def status_counts(catalog: Catalog, agent: str | None = None) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for e in proposal_entries(catalog):
        if visible_to(e, agent) and e.status in counts:
            counts[e.status] += 1
    return counts


def build_proposal(
    *,
    kind: str,
    proposed_by: str,
    fields: dict[str, Any],
    content: str,
    reason: str,
    sources: list[str] | None = None,
    source_agents: list[str] | None = None,
    evolves: str | None = None,
    taken: set[str] | None = None,
    exists: Any = None,
    evidence: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any], str]:
    """(path, frontmatter, note text) of a new pending proposal."""
    if kind not in KINDS:
        raise UsageError(f"unknown proposal kind {kind!r}", hint=f"one of {', '.join(KINDS)}")
    rid = new_review_id()
    ts = now_iso()
    meta: dict[str, Any] = {
        "id": rid,
        "kind": kind,
        "status": "pending",
        "proposed_by": proposed_by,
        "created": ts,
        "updated": ts,
        **{k: fields.get(k) for k in PROPOSAL_FIELDS},
        "evolves": evolves,
        "sources": list(sources or []) or None,
        "source_agents": list(source_agents or []) or None,
        "reason": reason,
        # Where it was learned (memory.conversations.conversation_evidence): what a reviewer reads to
        # see why, and what the applied memory keeps.
        "evidence": evidence or None,
        "content_hash": content_hash(content),
    }
    title = str(fields.get("title") or kind)
    taken = taken if taken is not None else set()
    path = f"{REVIEW_DIR}/{memory_filename(title, rid)}"
    while path in taken or (exists is not None and exists(path)):
        rid = new_review_id()
        meta["id"] = rid
        path = f"{REVIEW_DIR}/{memory_filename(title, rid)}"
    taken.add(path)
    return path, meta, render(meta, content)


def stage_remember_proposal(catalog: Catalog, vault: Vault, txn: Transaction, inp: MemoryInput, *,
                            agent: str | None) -> dict[str, Any]:
    """Stage an agent's "teach the hive" request (validated input, lock held, catalog fresh).

    Nothing is proposed twice: identical content already in shared memory is refused, and an identical
    pending proposal is returned instead of a new one. When shared memory already has an active memory
    with the same key, the proposal is to evolve it.
    """
    cat = catalog
    h = content_hash(inp.content)
    for e in cat.by_content_hash(h):
        if e.layer == SHARED and e.status == "active":
            raise DuplicateContent(
                f"shared memory already says this: {e.id} ({e.path})", hint="nothing to do"
            )
    for e in proposal_entries(cat, "pending"):
        if e.content_hash == h:
            return {
                "status": "proposed",
                "proposal": e.id,
                "id": e.id,
                "path": e.path,
                "already": True,
                "layer": SHARED,
                "memoryKey": e.memory_key,
                "hint": "an identical proposal is already waiting for Brain Review",
            }
    key = inp.memory_key or derive_memory_key(inp.type, inp.title, inp.project)
    evolves = next((e.id for e in cat.by_key(key) if e.layer == SHARED and e.status == "active"), None)
    fields = {
        "type": inp.type,
        "title": inp.title,
        "memory_key": key,
        "project": inp.project or None,
        "tags": inp.tags or None,
        "aliases": inp.aliases or None,
        "confidence": inp.confidence,
    }
    reason = f"agent {agent!r} asked to teach the hive" + (
        f" (would evolve {evolves})" if evolves else ""
    )
    path, meta, text = build_proposal(
        kind="remember",
        proposed_by=agent or "owner",
        fields=fields,
        content=inp.content,
        reason=reason,
        evolves=evolves,
        taken=set(txn.paths),
        exists=lambda p: vault.abs(p).exists(),
        evidence=(inp.provenance or {}).get("evidence"),
    )
    txn.write(path, text, expect_old="")
    # "id" is the proposal's: callers that print the id of what was stored get the note that was stored.
    return {
        "status": "proposed",
        "proposal": meta["id"],
        "id": meta["id"],
        "path": path,
        "memoryKey": key,
        "layer": SHARED,
        "evolves": evolves,
        "hint": "shared memory changes only through Brain Review; the owner decides "
        f"with `hive-brain review approve {meta['id']}`",
    }
