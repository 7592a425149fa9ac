"""Brain Review: proposals to change shared memory, decided by the vault owner.

What one agent concludes stays in its private layer; it becomes what every agent believes only
through a proposal the owner approves and applies. Proposals are ordinary notes under
``Operations/Brain Review/`` (so they sync, and the owner can read and even edit them in Obsidian
before approving): frontmatter ``id: rev-<ulid>``, ``kind`` (remember | promotion | import | pattern),
``status`` (pending -> approved | rejected; approved -> applied | rejected), ``proposed_by``, the
proposed memory's fields, ``sources`` and ``reason``; the body is the proposed content.

Sources of proposals (their note format is :mod:`.proposals`): an agent's shared write in enforcement mode ("teach the hive", via
``MemoryStore.remember``), and promotions: near-duplicate private memories of two or more agents,
and one agent's private memory that answers keep using (the usage log: ``record-usage``, ``answer``).
The promotion pass runs on ``promote``, ``consolidate --propose-promotions`` and once a day in the server.
Every change to a proposal, and applying it, is one journaled transaction.
"""

from __future__ import annotations

import builtins
import math
from bisect import bisect_left
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from ..errors import NoteError, NotFound, Refused, UsageError
from ..store.catalog import Catalog, Entry
from ..store.notes import (
    linked_id,
    now_iso,
    read_note,
    render,
    to_text_list,
)
from .layers import AGENT_LAYERS, SHARED, require_owner
from .model import MemoryInput
from .proposals import REVIEW_DIR, STATUSES, build_proposal, proposal_entries, visible_to
from .store import MemoryStore

JACCARD = 0.6
# "Answers keep using one agent's lesson": enough use to be worth every agent's while, counted over what
# the per-device usage log still holds (two files of 8 MB). A final answer is the stronger signal.
USAGE_FINAL_MIN = 3
USAGE_RETRIEVED_MIN = 10
APPLIED_ORIGIN = "agent-reviewed"
SYSTEM = "hive-brain"  # proposer of what hive-brain itself found (promotions)


@dataclass
class Proposal:
    entry: Entry
    meta: dict[str, Any]
    body: str

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def status(self) -> str:
        return str(self.meta.get("status") or "pending")

    def summary(self) -> dict[str, Any]:
        m = self.meta
        return {
            "id": self.id,
            "kind": m.get("kind"),
            "status": self.status,
            "proposedBy": m.get("proposed_by"),
            "type": m.get("type"),
            "title": m.get("title"),
            "memoryKey": m.get("memory_key"),
            "created": m.get("created"),
            "reason": m.get("reason"),
            "sources": to_text_list(m.get("sources")),
            "evolves": m.get("evolves"),
            "appliedMemory": m.get("applied_memory"),
            "evidence": evidence_of(m),
            "path": self.entry.path,
        }


def evidence_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """A proposal's ``evidence`` frontmatter as the JSON shows it (camelCase; None without any)."""
    ev = meta.get("evidence")
    if not isinstance(ev, dict):
        return None
    return {"conversation": ev.get("conversation"), "sessionId": ev.get("session_id"),
            "transcript": ev.get("transcript"), "turn": ev.get("turn"), "excerpt": ev.get("excerpt")}


class BrainReview:
    """The queue, over a MemoryStore (its vault, settings, catalog, lock and index publishing)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.catalog = store.catalog
        self.settings = store.settings

    @property
    def agent(self) -> str | None:
        return self.settings.agent_id

    # -- reading -------------------------------------------------------------------------------
    def list(self, status: str | None = None) -> list[dict[str, Any]]:
        if status and status not in STATUSES:
            raise UsageError(f"unknown status {status!r}", hint=f"one of {', '.join(STATUSES)}")
        self.catalog.refresh()
        return [
            {
                "id": e.id,
                "kind": e.meta.get("kind"),
                "status": e.status,
                "proposedBy": e.meta.get("proposed_by"),
                "type": e.meta.get("type"),
                "title": e.meta.get("title"),
                "created": e.meta.get("created"),
                "reason": e.meta.get("reason"),
                "evidence": evidence_of(e.meta),
                "path": e.path,
            }
            for e in proposal_entries(self.catalog, status)
            if visible_to(e, self.agent)
        ]

    def _get(self, review_id: str) -> Proposal:
        rid = (review_id or "").strip()
        if not rid:
            raise UsageError("proposal id is empty")
        e = self.catalog.by_id(rid)
        if e is None or not e.path.startswith(REVIEW_DIR + "/") or not visible_to(e, self.agent):
            raise NotFound(
                f"no Brain Review proposal with id {rid!r}", hint="list them with `hive-brain review list`"
            )
        note = self.store.load(e)
        return Proposal(e, dict(note.meta), note.body.strip("\n"))

    def show(self, review_id: str) -> dict[str, Any]:
        self.catalog.refresh()
        p = self._get(review_id)
        return {**p.summary(), "meta": p.meta, "content": p.body}

    # -- deciding ------------------------------------------------------------------------------
    def _decide(self, review_id: str, status: str, allowed: tuple[str, ...], **extra: Any) -> dict[str, Any]:
        verb = {"approved": "approving", "rejected": "rejecting"}.get(status, "deciding")
        require_owner(self.settings, f"{verb} Brain Review proposals", always=True)
        with self.store.transaction(f"review {status}") as tx:
            p = self._get(review_id)
            if p.status not in allowed:
                raise Refused(f"{p.id} is {p.status}; only a {' or '.join(allowed)} proposal can be {status}")
            meta = {
                **p.meta,
                "status": status,
                "decided_by": "owner",
                "decided_at": now_iso(),
                "updated": now_iso(),
                **extra,
            }
            tx.write(p.entry.path, render(meta, p.body), expect_old=p.entry.sha)
        return {"status": status, "proposal": p.id, "path": p.entry.path}

    def approve(self, review_id: str) -> dict[str, Any]:
        return self._decide(review_id, "approved", ("pending",))

    def reject(self, review_id: str, reason: str | None = None) -> dict[str, Any]:
        return self._decide(review_id, "rejected", ("pending", "approved"), decision_reason=reason or None)

    def apply(self, review_id: str) -> dict[str, Any]:
        """An approved proposal becomes shared memory (written by the owner), in one transaction that
        also marks the proposal applied: a crash leaves both or neither."""
        require_owner(self.settings, "applying Brain Review proposals", always=True)
        with self.store.transaction("review apply") as tx:
            p = self._get(review_id)
            if p.status != "approved":
                hint = (
                    f"approve it first: `hive-brain review approve {p.id}`" if p.status == "pending" else None
                )
                raise Refused(f"{p.id} is {p.status}; only an approved proposal can be applied", hint=hint)
            m = p.meta
            provenance = {
                "review": p.id,
                "proposed_by": m.get("proposed_by"),
                "sources": to_text_list(m.get("sources")) or None,
                "evidence": m.get("evidence") or None,  # where it was learned, kept on the memory
            }
            old = self.catalog.by_id(str(m["evolves"])) if m.get("evolves") else None
            if old is not None and old.kind == "memory" and old.layer == SHARED and old.status == "active":
                path, meta = tx.evolve(
                    old,
                    p.body,
                    str(m.get("title") or "") or None,
                    origin=APPLIED_ORIGIN,
                    provenance=provenance,
                )
            else:
                # The owner may have edited the proposal in Obsidian: its note is what gets applied.
                inp = MemoryInput(
                    type=str(m.get("type") or "note"),
                    title=str(m.get("title") or ""),
                    content=p.body,
                    memory_key=m.get("memory_key") or None,
                    project=m.get("project") or None,
                    tags=to_text_list(m.get("tags")),
                    aliases=to_text_list(m.get("aliases")),
                    confidence=m.get("confidence"),
                    scope="hive",
                    origin=APPLIED_ORIGIN,
                    provenance=provenance,
                )
                path, meta = tx.remember(inp)
            done = {
                **m,
                "status": "applied",
                "applied_memory": meta["id"],
                "applied_at": now_iso(),
                "updated": now_iso(),
            }
            tx.write(p.entry.path, render(done, p.body), expect_old=p.entry.sha)
        return {
            "status": "applied",
            "proposal": p.id,
            "id": meta["id"],
            "path": path,
            "supersedes": linked_id(meta.get("supersedes")),
            "layer": SHARED,
        }

    # -- promotion -----------------------------------------------------------------------------
    def promote(self, *, dry_run: bool = False, threshold: float = JACCARD,
                timeout: float | None = None) -> dict[str, Any]:
        """Queue one promotion proposal per group of near-duplicate private memories of 2+ agents.

        Also proposes each private memory that answers keep using (:func:`used_memories`).
        ``timeout``: how long to wait for the vault lock (the server's daily pass does not queue).

        Idempotent: a group already covered by a proposal (whatever its status: a rejected promotion
        is not asked again) is skipped; a pending one that covers part of a grown group is extended.
        """
        require_owner(
            self.settings, "proposing promotions (it reads every agent's private memory)", always=True
        )
        st = self.store
        with st.transaction("promote", timeout=timeout) as tx:
            groups = find_groups(self.catalog, threshold=threshold)
            existing = [
                (e, set(to_text_list(e.meta.get("sources"))))
                for e in proposal_entries(self.catalog)
                if e.meta.get("kind") == "promotion"
            ]
            shared = [e for e in self.catalog.memories() if e.layer == SHARED and e.status == "active"]
            shared_hashes = {e.content_hash: e for e in shared}
            shared_keys = {e.memory_key: e for e in shared}
            report: dict[str, Any] = {
                "groups": len(groups),
                "proposed": [],
                "extended": [],
                "skipped": [],
                "dryRun": dry_run,
                "used": 0,
            }
            taken: set[str] = set()
            for g in groups:
                ids = {e.id for e in g.members}
                covered = next((e for e, src in existing if ids <= src), None)
                if covered is not None:
                    report["skipped"].append(
                        {
                            "sources": sorted(ids),
                            "reason": f"already proposed as {covered.id} ({covered.status})",
                        }
                    )
                    continue
                in_hive = next(
                    (shared_hashes[e.content_hash] for e in g.members if e.content_hash in shared_hashes),
                    None,
                )
                rep = g.representative
                same_key = shared_keys.get(rep.memory_key)
                if (
                    in_hive is None
                    and same_key is not None
                    and _jaccard(g.words[rep.id], _words_of_entry(self.catalog, same_key)) >= threshold
                ):
                    in_hive = same_key
                if in_hive is not None:
                    report["skipped"].append(
                        {"sources": sorted(ids), "reason": f"shared memory already holds it ({in_hive.id})"}
                    )
                    continue
                agents = sorted({e.agent for e in g.members})
                reason = (
                    f"agents {', '.join(agents)} hold near-duplicate private memories "
                    f"({'; '.join(sorted(g.basis))})"
                )
                partial = next((e for e, src in existing if e.status == "pending" and ids & src), None)
                if partial is not None:
                    report["extended"].append(partial.id)
                    if not dry_run:
                        note = tx.load(partial)
                        srcs = sorted(set(to_text_list(note.meta.get("sources"))) | ids)
                        who = sorted(set(to_text_list(note.meta.get("source_agents"))) | set(agents))
                        meta = {
                            **note.meta,
                            "sources": srcs,
                            "source_agents": who,
                            "reason": reason,
                            "updated": now_iso(),
                        }
                        tx.write(partial.path, render(meta, note.body, like=note), expect_old=partial.sha)
                    continue
                body = g.bodies[rep.id]
                fields = {
                    "type": rep.meta.get("type"),
                    "title": rep.title,
                    "memory_key": rep.memory_key,
                    "project": _unanimous(g.members, "project"),
                    "tags": _union(g.members, "tags"),
                    "aliases": _union(g.members, "aliases"),
                    "confidence": None,
                }
                evolves = same_key.id if same_key is not None else None
                path, meta, text = build_proposal(
                    kind="promotion",
                    proposed_by=SYSTEM,
                    fields=fields,
                    content=body,
                    reason=reason,
                    sources=sorted(ids),
                    source_agents=agents,
                    evolves=evolves,
                    taken=taken,
                    exists=lambda p: st.vault.abs(p).exists(),
                )
                report["proposed"].append(
                    {
                        "proposal": meta["id"],
                        "path": path,
                        "title": rep.title,
                        "sources": sorted(ids),
                        "agents": agents,
                        "basis": sorted(g.basis),
                    }
                )
                if not dry_run:
                    tx.write(path, text, expect_old="")
            grouped = {e.id for g in groups for e in g.members}
            self._propose_used(tx, report, existing, shared_hashes, shared_keys, grouped, taken, threshold)
        return report

    def _propose_used(self, tx: Any, report: dict[str, Any], existing: builtins.list[tuple[Entry, set[str]]],
                      shared_hashes: dict[str, Entry], shared_keys: dict[str, Entry], grouped: set[str],
                      taken: set[str], threshold: float) -> None:
        """One promotion proposal per private lesson that answers keep using, with the usage as evidence."""
        from .operations import usage_counts

        dry_run = report["dryRun"]
        used = used_memories(self.catalog, usage_counts(self.store.vault.state))
        report["used"] = len(used)
        for e, use in used:
            if e.id in grouped:
                continue  # already proposed above, as part of a group
            covered = next((p for p, src in existing if e.id in src), None)
            if covered is not None:
                report["skipped"].append({"sources": [e.id], "reason": f"already proposed as {covered.id} ({covered.status})"})
                continue
            same_key = shared_keys.get(e.memory_key)
            in_hive = shared_hashes.get(e.content_hash)
            try:
                body = tx.load(e).body.strip()
            except NoteError:
                continue
            if in_hive is None and same_key is not None and _jaccard(
                    _words(e.title, body), _words_of_entry(self.catalog, same_key)) >= threshold:
                in_hive = same_key
            if in_hive is not None:
                report["skipped"].append({"sources": [e.id], "reason": f"shared memory already holds it ({in_hive.id})"})
                continue
            basis = (f"answers used it {use['final-answer']} times, recalls retrieved it {use['retrieved']} times "
                     "(usage log)")
            fields = {k: e.meta.get(k) for k in ("type", "project", "tags", "aliases")}
            fields.update(title=e.title, memory_key=e.memory_key, confidence=None)
            path, meta, _text = build_proposal(
                kind="promotion", proposed_by=SYSTEM, fields=fields, content=body,
                reason=f"answers keep using agent {e.agent}'s {e.meta.get('type') or 'memory'}: {basis}",
                sources=[e.id], source_agents=[e.agent], evolves=same_key.id if same_key is not None else None,
                taken=taken, exists=lambda p: self.store.vault.abs(p).exists())
            meta["usage_final_answer"] = use["final-answer"]
            meta["usage_retrieved"] = use["retrieved"]
            report["proposed"].append({"proposal": meta["id"], "path": path, "title": e.title, "sources": [e.id],
                                       "agents": [e.agent], "basis": [basis],
                                       "usage": {"finalAnswer": use["final-answer"], "retrieved": use["retrieved"]}})
            existing.append((e, {e.id}))  # the same memory is not proposed twice in one pass
            if not dry_run:
                tx.write(path, render(meta, body), expect_old="")


def used_memories(catalog: Catalog, counts: dict[str, dict[str, Any]], *, final_min: int = USAGE_FINAL_MIN,
                  retrieved_min: int = USAGE_RETRIEVED_MIN) -> list[tuple[Entry, dict[str, int]]]:
    """Active private/task memories used at least ``final_min`` times by final answers or retrieved
    ``retrieved_min`` times, most used first: what promotion asks the owner to share."""
    out = []
    for mid, raw in counts.items():
        # "finalAnswer" is how the usage table names it; "final-answer" the kind as logged (both accepted).
        c = {"final-answer": int(raw.get("finalAnswer", raw.get("final-answer")) or 0),
             "retrieved": int(raw.get("retrieved") or 0)}
        if c["final-answer"] < final_min and c["retrieved"] < retrieved_min:
            continue
        e = catalog.by_id(mid)
        if (e is None or e.kind != "memory" or e.status != "active" or e.layer not in AGENT_LAYERS or e.problem
                or e.copy_of or e.meta.get("overrides") or e.meta.get("rollup_of")):
            continue
        out.append((e, c))
    return sorted(out, key=lambda t: (-t[1]["final-answer"], -t[1]["retrieved"], t[0].id))


# ---------------------------------------------------------------------------------------------- grouping
@dataclass
class Group:
    members: list[Entry]
    basis: set[str]
    words: dict[str, frozenset[str]]
    bodies: dict[str, str]

    @property
    def representative(self) -> Entry:
        """The member closest to all the others (the newest on a tie): the wording most agents share."""

        def closeness(e: Entry) -> tuple[float, str]:
            s = sum(_jaccard(self.words[e.id], self.words[o.id]) for o in self.members if o.id != e.id)
            return (s, str(e.meta.get("updated") or e.meta.get("created") or ""))

        return max(self.members, key=closeness)


def similar_pairs(
    words: dict[str, frozenset[str]], agent_of: dict[str, str], threshold: float
) -> list[tuple[str, str]]:
    """Every pair of ids of two different agents whose word sets have Jaccard >= ``threshold``.

    All-pairs Jaccard uses prefix filtering (tokens ordered rarest first): two sets reaching the
    threshold must share a token among their first |s| - ceil(t*|s|) + 1, so only those pairs are
    compared, which keeps a vault of many private memories far from quadratic. Sets are probed
    smallest first against an index of the prefixes already seen, kept per (agent, token) in
    ascending size: a set of n words needs a partner of at least t*n words, and only another
    agent's, so each probe takes a slice of each list (a bisect, no loop in Python). At 2,836
    private memories of three agents (the 10k fixture vault, whose small vocabulary makes every
    prefix long) that took the pass from 4.3-4.8 to 1.5 CPU-s, the same pairs.
    """
    df = Counter(t for w in words.values() for t in w)
    agents = set(agent_of.values())
    sizes: dict[tuple[str, str], list[int]] = defaultdict(list)  # (agent, token) -> ascending sizes
    owners: dict[tuple[str, str], list[str]] = defaultdict(list)  # ... and the ids beside them
    out: list[tuple[str, str]] = []
    for i in sorted(words, key=lambda i: (len(words[i]), i)):
        mine, me = words[i], agent_of[i]
        n = len(mine)
        if not n:
            continue
        need = threshold * n  # a partner with fewer words cannot reach the threshold
        cands: set[str] = set()
        for t in sorted(mine, key=lambda t: (df[t], t))[: n - math.ceil(threshold * n) + 1]:
            for a in agents:
                if a != me and (sz := sizes.get((a, t))):
                    cands.update(owners[(a, t)][bisect_left(sz, need):])
            sizes[(me, t)].append(n)
            owners[(me, t)].append(i)
        for o in sorted(cands):
            theirs = words[o]
            inter = len(mine & theirs)
            if inter / (n + len(theirs) - inter) >= threshold:  # _jaccard, without building the union
                out.append((i, o))
    return out


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def _words(title: str, body: str) -> frozenset[str]:
    from ..index.textproc import content_words

    return frozenset(content_words(f"{title}\n{body}"))


def _words_of_entry(catalog: Catalog, e: Entry) -> frozenset[str]:
    try:
        note = read_note(catalog.vault.root / e.path, e.path, max_bytes=catalog.max_note_bytes)
    except Exception:  # noqa: BLE001 - an unreadable note compares as empty
        return frozenset()
    return _words(e.title, note.body)


def _unanimous(members: list[Entry], key: str) -> Any:
    vals = {str(e.meta.get(key)) for e in members if e.meta.get(key)}
    return vals.pop() if len(vals) == 1 and all(e.meta.get(key) for e in members) else None


def _union(members: list[Entry], key: str) -> list[str] | None:
    out: list[str] = []
    for e in members:
        for t in to_text_list(e.meta.get(key)):
            if t not in out:
                out.append(t)
    return out or None


def find_groups(catalog: Catalog, *, threshold: float = JACCARD) -> list[Group]:
    """Groups of active private/task memories of two or more agents that say the same thing: the same
    memory_key, the same content_hash, or word-set Jaccard >= ``threshold`` (cross-agent pairs only,
    :func:`similar_pairs`).
    """
    mems = catalog.select(
        "kind = 'memory' AND status = 'active' AND layer IN ('private', 'task') AND problem IS NULL"
    )
    if len({e.agent for e in mems}) < 2:
        return []
    bodies: dict[str, str] = {}
    words: dict[str, frozenset[str]] = {}
    for e in mems:
        try:
            bodies[e.id] = read_note(
                catalog.vault.root / e.path, e.path, max_bytes=catalog.max_note_bytes
            ).body.strip()
        except Exception:  # noqa: BLE001 - unreadable notes are doctor's business, not promotion's
            continue
        words[e.id] = _words(e.title, bodies[e.id])
    mems = [e for e in mems if e.id in words]
    parent = {e.id: e.id for e in mems}
    basis: dict[str, set[str]] = defaultdict(set)

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str, why: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra
            basis[ra] |= basis.pop(rb, set())
        basis[ra].add(why)

    for attr, why in (("memory_key", "same memory_key"), ("content_hash", "same content")):
        buckets: dict[str, list[Entry]] = defaultdict(list)
        for e in mems:
            v = getattr(e, attr)
            if v:
                buckets[v].append(e)
        for b in buckets.values():
            if len({e.agent for e in b}) > 1:
                for e in b[1:]:
                    union(b[0].id, e.id, why)

    for x, y in similar_pairs(words, {e.id: e.agent for e in mems}, threshold):
        union(x, y, f"word overlap >= {threshold:g}")
    groups: dict[str, list[Entry]] = defaultdict(list)
    for e in mems:
        groups[find(e.id)].append(e)
    out = []
    for root, members in groups.items():
        if len(members) > 1 and len({e.agent for e in members}) > 1:
            out.append(
                Group(
                    sorted(members, key=lambda e: e.id),
                    basis[root],
                    {e.id: words[e.id] for e in members},
                    {e.id: bodies[e.id] for e in members},
                )
            )
    return sorted(out, key=lambda g: g.members[0].id)
