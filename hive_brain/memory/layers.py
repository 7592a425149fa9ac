"""Memory layers and agent identity: who may read and change what, private overrides and conflicts.

Three layers share one index: ``shared`` (the hive), ``private`` (one agent's) and ``task`` (one task
of one agent). Recall reads shared plus the caller's own private/task layers; that boundary is a
predicate inside the BM25 query and the vector prefilter (:func:`visibility`, stated once here). This module holds
the rules that sit on top of it:

* ``require_owner``: maintenance and Brain Review decisions are the owner's (no agent id; in
  enforcement mode, proved by the owner key: ``store.identity``) alone;
* overrides: a private memory may name a shared one in ``overrides`` and then replaces it in that
  agent's recall only, never for anyone else, and never when the shared memory is an instruction,
  preference or decision the user stated (that is a conflict, reported instead of applied);

Kept import-light (no tantivy/lancedb/numpy): recall on the hook path calls ``apply_overrides``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..errors import NotFound, PermissionDenied, Refused, UsageError
from ..index.predicates import And, Eq, In, Or, Pred, matches
from ..store.catalog import Catalog, Entry

SHARED, PRIVATE, TASK = "shared", "private", "task"
AGENT_LAYERS = (PRIVATE, TASK)
# What the user told the hive is not an agent's to replace, even for itself: an agent that disagrees
# with such a memory has to ask (a Brain Review proposal), not quietly believe otherwise.
PROTECTED_TYPES = frozenset({"instruction", "preference", "decision"})
EXCERPT_CHARS = 1200


def enforced(settings: Settings) -> bool:
    """True when the caller is an agent and per-agent permissions are enforced."""
    return bool(settings.agent_id and settings.scoped_permissions)


def require_owner(settings: Settings, action: str, *, always: bool = False) -> None:
    """Refuse ``action`` to an agent: in enforcement mode, or ``always`` (Brain Review decisions, reading
    across agents' private layers), which no agent may do even when permissions are not enforced."""
    agent = settings.agent_id
    if agent and (always or settings.scoped_permissions):
        raise PermissionDenied(
            f"{action} is the vault owner's alone; agent {agent!r} may not do it",
            hint="run it without HIVE_AGENT_ID (as the owner)"
            + (", with --owner-key PATH" if settings.scoped_permissions else ""),
        )
    if settings.scoped_permissions and not settings.owner_verified:
        # In enforcement mode a missing id proves nothing (store.identity.establish refuses such a
        # caller up front; this holds for code that builds its own settings).
        raise PermissionDenied(f"{action} is the vault owner's alone, and this caller has not proved it is the owner",
                               hint="pass --owner-key PATH (the file `hive-brain owner init` created)")


# -- who reads what: the one statement of the rule -------------------------------------------------
def visibility(agent: str | None) -> Pred:
    """What a search may return to ``agent``: the shared layer plus the caller's own private and task
    layers; the owner (no agent) searches the shared layer. Compiled into the BM25 query and the vector
    prefilter (never applied after a top-k cut) and evaluated on catalog entries by :func:`visible_from`.
    """
    if not agent:
        return Eq("layer", SHARED)
    return Or((Eq("layer", SHARED), And((Eq("agent", agent), In("layer", AGENT_LAYERS)))))


def visible_from(e: Entry, layer: str, agent: str) -> bool:
    """Would a reader writing to (``layer``, ``agent``) see ``e``? A shared-layer writer is the owner's
    view (shared only); an agent-layer writer is that agent's. Duplicate checks count only there: the
    owner writing what one agent keeps privately is not a duplicate (nobody reads both), and saying
    which private note holds it would leak that note to the owner."""
    reader = agent if layer != SHARED else None
    return matches(visibility(reader), {"layer": e.layer, "agent": e.agent})


def may_open(e: Entry, agent: str | None) -> bool:
    """May ``agent`` open ``e`` by its id (get/update/delete)? Exactly what its searches would return:
    a missing id never widens a read, so the owner (no id) opens the shared layer; to act on an agent's
    own memory the owner names that agent (``--agent``, which enforcement mode checks)."""
    return matches(visibility(agent), {"layer": e.layer, "agent": e.agent})


def path_readable(path: str, agent: str | None) -> bool:
    """May ``agent`` see that a note at ``path`` exists? Judged by where it lives (``Agents/<id>/`` is
    that agent's), for paths that may no longer be in the catalog (generations, manifests)."""
    from ..store.catalog import classify

    _kind, layer, owner, _task = classify(path, {})
    return matches(visibility(agent), {"layer": layer, "agent": owner})


def redact_paths(label: str, agent: str | None) -> str:
    """A generation label ("write: a.md, b.md ...") with the paths ``agent`` may not read replaced by
    "(a private note)"."""
    head, sep, rest = label.partition(": ")
    if not sep:
        return label
    more = rest.endswith(" ...")
    items = rest[: -len(" ...")] if more else rest
    shown = [p if not p.endswith(".md") or path_readable(p, agent) else "(a private note)" for p in items.split(", ")]
    return head + sep + ", ".join(shown) + (" ..." if more else "")


def origin_of(e: Entry) -> str:
    # A note without an origin was written by hand in Obsidian, i.e. by the user.
    return str(e.meta.get("origin") or "user").strip().lower()


def user_stated(e: Entry) -> bool:
    """A shared instruction, preference or decision that the user stated: never overridable."""
    return str(e.meta.get("type") or "").strip().lower() in PROTECTED_TYPES and origin_of(e) == "user"


def _updated(e: Entry) -> str:
    return str(e.meta.get("updated") or e.meta.get("created") or "")


def check_override(
    catalog: Catalog, target_id: str, *, layer: str, agent: str, ignore_ids: frozenset[str] = frozenset()
) -> Entry:
    """Validate that a new memory in (layer, agent) may override ``target_id``; returns the target.

    Raises UsageError (not a private memory), NotFound (no such shared memory) or Refused (not the
    current version; a user-stated instruction/preference/decision; already overridden by this agent).
    """
    target_id = str(target_id or "").strip()
    if not target_id:
        raise UsageError("--overrides needs a memory id")
    if layer not in AGENT_LAYERS or not agent:
        raise UsageError(
            "only an agent's private or task memory can override a shared memory",
            hint="set HIVE_AGENT_ID, or drop --overrides",
        )
    t = catalog.by_id(target_id)
    if t is None or t.kind != "memory" or t.layer != SHARED:
        raise NotFound(
            f"no shared memory with id {target_id!r} to override",
            hint="an override names a shared memory (find ids with `hive-brain recall ... --json`)",
        )
    if t.status != "active":
        head = t.next_id
        raise Refused(
            f"{t.id} is {t.status}, not the current version",
            hint=f"override the current version{f' ({head})' if head else ''}",
        )
    if user_stated(t):
        raise Refused(
            f"{t.id} is a {t.meta.get('type')} the user stated (origin: user); "
            "a private memory cannot override it",
            hint="ask the user, or propose a change for Brain Review with `remember --memory-scope hive`",
        )
    for e in _overriders(catalog, agent):
        if e.id not in ignore_ids and str(e.meta.get("overrides")) == t.id:
            raise Refused(
                f"{e.id} already overrides {t.id} for agent {agent!r}",
                hint=f"change it with `hive-brain evolve --memory-id {e.id} --content ...`",
            )
    return t


def _overriders(catalog: Catalog, agent: str | None) -> list[Entry]:
    """Active private/task memories (of ``agent``, or of every agent) that name an override."""
    # json_extract keeps this a single SQL scan: it runs on every agent recall.
    where = (
        "kind = 'memory' AND status = 'active' AND layer IN ('private', 'task') AND problem IS NULL "
        # LIKE first: a plain substring test skips most rows before JSON is parsed.
        "AND meta LIKE '%\"overrides\"%' "
        "AND json_extract(meta, '$.overrides') IS NOT NULL AND json_extract(meta, '$.overrides') != ''"
    )
    if agent is None:
        return catalog.select(where)
    return catalog.select(where + " AND agent = ?", (agent,))


def _conflict(private: Entry, shared: Entry) -> dict[str, Any]:
    return {
        "kind": "override",
        "private": private.id,
        "shared": shared.id,
        "agent": private.agent,
        "privatePath": private.path,
        "sharedPath": shared.path,
        "reason": f"{private.id} overrides a {shared.meta.get('type')} the user stated (origin: user); "
        "the user's memory stays in force",
    }


def _substitute(
    shared_hit: dict[str, Any], p: Entry, catalog: Catalog, full_text: Callable[[str], str] | None
) -> dict[str, Any]:
    """A hit for an override that did not match the query itself, in the slot of the memory it replaces."""
    from ..store.notes import read_note

    try:
        if full_text is not None:
            body = full_text(p.path).strip()
        else:
            body = read_note(
                catalog.vault.root / p.path, p.path, max_bytes=catalog.max_note_bytes, scrub=True
            ).body.strip()
    except Exception:  # noqa: BLE001 - an unreadable override is reported by doctor; the hit still names it
        body = ""
    text = body[:EXCERPT_CHARS] + ("…" if len(body) > EXCERPT_CHARS else "")
    hit: dict[str, Any] = {
        "path": p.path,
        "id": p.id,
        "title": p.title,
        "kind": "memory",
        "type": p.meta.get("type"),
        "status": p.status,
        "date": shared_hit.get("date"),
        "score": shared_hit.get("score"),
        "passage": {"passageId": f"{p.path}#0", "heading": "", "text": text},
        "passages": [],
        "scoreDetails": {**(shared_hit.get("scoreDetails") or {}), "substitutedFor": shared_hit.get("id")},
    }
    if "content" in shared_hit:
        hit["content"] = body
    return hit


def apply_overrides(
    hits: list[dict], catalog: Catalog, agent: str | None, *, full_text: Callable[[str], str] | None = None
) -> tuple[list[dict], list[dict]]:
    """Replace shared hits that the caller's own private memories override; report conflicts.

    A replaced shared hit is dropped and the overriding private hit takes its rank (it is built from
    the note when the query did not match it). Overrides of user-stated memories are not applied: both
    hits stay and the pair is returned as a conflict. Idempotent; the owner's hits pass unchanged.
    ``full_text(path)`` gives the text of a substituted note as the view indexed it (e.g. for a replayed
    generation); by default it is read from the vault.
    """
    if not agent or not hits:
        return list(hits), []
    mine = _overriders(catalog, agent)
    if not mine:
        return list(hits), []
    by_target: dict[str, Entry] = {}
    for e in sorted(mine, key=_updated):  # the newest override of a memory wins
        by_target[str(e.meta["overrides"]).strip()] = e
    entries = catalog.by_paths([h["path"] for h in hits if h.get("path")])
    hit_ids = {h.get("id") for h in hits if h.get("id")}
    out: list[dict] = []
    pos: dict[str, int] = {}
    conflicts: list[dict] = []
    seen_pairs: set[tuple[str, str]] = set()

    def note_conflict(p: Entry, s: Entry) -> dict[str, Any]:
        c = _conflict(p, s)
        if (p.id, s.id) not in seen_pairs:
            seen_pairs.add((p.id, s.id))
            conflicts.append(c)
        return c

    for h in hits:
        hid = h.get("id")
        hit_entry = entries.get(h.get("path", ""))
        if hit_entry is not None and hit_entry.layer == SHARED and hid in by_target:
            p = by_target[hid]
            if user_stated(hit_entry):
                c = note_conflict(p, hit_entry)
                h = {**h, "conflict": {"private": p.id, "reason": c["reason"]}}
            elif p.id in pos:
                out[pos[p.id]] = {**out[pos[p.id]], "overrides": hid}
                continue
            else:
                own = next((x for x in hits if x.get("id") == p.id), None) if p.id in hit_ids else None
                sub = dict(own) if own is not None else _substitute(h, p, catalog, full_text)
                sub["overrides"] = hid
                sub["scoreDetails"] = {**(sub.get("scoreDetails") or {}), "overrides": hid}
                pos[p.id] = len(out)
                out.append(sub)
                continue
        elif (hit_entry is not None and hit_entry.layer in AGENT_LAYERS and hit_entry.agent == agent
              and hit_entry.meta.get("overrides")):
            if hid in pos:
                continue  # already moved up into the slot of the memory it replaces
            t = catalog.by_id(str(hit_entry.meta["overrides"]).strip())
            if t is not None and t.layer == SHARED and user_stated(t):
                c = note_conflict(hit_entry, t)
                h = {**h, "conflict": {"shared": t.id, "reason": c["reason"]}}
            elif t is not None and t.layer == SHARED and "overrides" not in h:
                h = {**h, "overrides": t.id}
        if hid:
            pos[hid] = len(out)
        out.append(h)
    return out, conflicts


def conflicts(catalog: Catalog, agent: str | None = None) -> list[dict]:
    """Every override of a user-stated memory in the vault (of one agent, when ``agent`` is given).

    Such overrides are refused at write time; these come from hand-edited notes or from a shared
    memory that became user-stated later. They are reported, never applied.
    """
    out = []
    for p in sorted(_overriders(catalog, agent), key=lambda e: (e.agent, e.path)):
        t = catalog.by_id(str(p.meta["overrides"]).strip())
        if t is not None and t.kind == "memory" and t.layer == SHARED and user_stated(t):
            out.append(_conflict(p, t))
    return out


def layer_counts(
    catalog: Catalog, agent: str | None = None, *, settings: Settings | None = None
) -> dict[str, Any]:
    """Active memories per layer (private and task per agent). An agent sees its own breakdown and a
    total for the others: it has no business knowing who else keeps what (the owner sees all counts)."""
    rows = catalog.db.execute(
        "SELECT layer, agent, COUNT(*) FROM notes WHERE kind = 'memory' AND status = 'active' AND copy_of = '' "
        "GROUP BY layer, agent"
    ).fetchall()
    counts: dict[str, Any] = {SHARED: 0, PRIVATE: {}, TASK: {}}
    hide_others = bool(agent)
    for layer, who, n in rows:
        if layer == SHARED:
            counts[SHARED] += n
        elif layer in AGENT_LAYERS:
            key = who if not hide_others or who == agent else "(other agents)"
            counts[layer][key] = counts[layer].get(key, 0) + n
    counts["total"] = sum(n for _, _, n in rows)
    return counts
