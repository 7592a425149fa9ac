"""Recall: candidates from BM25 and vectors over passages, fused with features into note hits.

Boundaries (layer/agent/kind/type/project/time) are one predicate applied *inside* both the BM25
query and the vector prefilter. Ranking happens at passage level and is aggregated per note (a long
note scores by its best passage, helped a little by other matching passages). Every feature that
moves a note is reported in ``scoreDetails``.

The pipeline: the question analysed once (:mod:`.query`) -> candidates (:mod:`.candidates`) -> a
features record per candidate -> ``score(features, PARAMS)`` (:mod:`.features`) -> the abstention
policy (:mod:`.abstain`) -> hits, a superseded memory resolved to the head of its chain. Every weight
and threshold is in ``PARAMS`` (:mod:`.params`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..index.predicates import And, Eq, In, Not, Pred, Range, all_of
from ..memory.layers import visibility
from ..store.catalog import Catalog, Entry
from ..store.chain import walk
from ..store.text import check_text, clean_text
from . import candidates, features, late, rerank, spelling
from .abstain import fits, memory_is_weak
from .abstain import read as abstain_read
from .abstain import reason as abstain_reason
from .candidates import BACKGROUND, CANDIDATES, Cand, background_vectors
from .params import PARAMS
from .query import Query, analyse

__all__ = ["BACKGROUND", "CANDIDATES", "KINDS_ALL", "PARAMS", "Cand", "View", "background_vectors", "build_where",
           "search"]

KINDS_ALL = ("memory", "note", "conversation", "core")
DROP_BELOW = PARAMS["drop_below"]  # the default of search(drop_ratio=...)
DAY_S = 86400


@dataclass
class View:
    """What a recall reads: the current index, or a replayed generation."""

    lexical: Any
    catalog: Catalog
    vectors: Any = None
    embedder: Any = None
    generation: int | None = None
    warnings: list[str] = field(default_factory=list)
    semantic_off_reason: str | None = None
    usage: Any = None  # memory.usage.UsageTable of this device's usage log; None: usage does not rank (replay)
    # The index is unavailable (missing, being built, damaged, no state dir): a plain scan of the notes
    # answers instead (:mod:`.scan`); ``lexical`` and ``catalog`` are then None.
    scan: Any = None


def build_where(*, agent: str | None, kinds: tuple[str, ...], types: list[str] | None = None, project: str | None = None,
                include_archived: bool = False, cutoff: int | None = None,
                versions_until: int | None = None) -> Pred:
    parts: list[Pred | None] = [visibility(agent), In("kind", kinds)]
    if types:
        parts.append(In("type", tuple(types)))
    if project:
        parts.append(Eq("project", project))
    if not include_archived:
        parts.append(Not(Eq("status", "archived")))
    if cutoff is not None:
        parts.append(Range("date", hi=cutoff))
    if versions_until is not None:
        # A time the question names ("in January 2025"): a memory version written after it was not
        # yet true then; the version current at its end answers (_head), other notes are only boosted.
        parts.append(Not(And((Eq("kind", "memory"), Range("date", lo=versions_until + 1)))))
    p = all_of(*parts)
    assert p is not None
    return p


def _excerpt(text: str, detail: str) -> str:
    text = text.strip()
    if detail == "abstract":
        first = text.split("\n\n", 1)[0]
        return first[:280] + ("…" if len(first) > 280 else "")
    if detail == "overview":
        return text[:1200] + ("…" if len(text) > 1200 else "")
    return text


@dataclass
class _Ranking:
    ranked: list[Cand]  # best first
    info: dict[str, Any]
    docs: dict[str, dict]  # passage id -> stored passage
    entries: dict[str, Entry]  # candidate path -> catalog entry


def _rank(view: View, q: Query, kinds: tuple[str, ...], *, agent: str | None, types: list[str] | None,
          tags: list[str] | None, project: str | None, semantic: bool, pool: int, qcache: dict[str, Any],
          rerank_cold: int | None = None, params: dict[str, float] = PARAMS) -> _Ranking:
    P = params
    where = build_where(agent=agent, kinds=kinds, types=types, project=project, include_archived=False, cutoff=q.cutoff,
                        versions_until=_versions_until(q) if q.cutoff is None else None)
    cands, info = candidates.gather(view, q, where, semantic=semantic, qcache=qcache, pool=pool)
    if q.window is not None:
        candidates.add_window(view, cands, where, q.window)
    docs: dict[str, dict] = info.pop("docs")
    missing = [p for c in cands.values() for p in c.pids if p not in docs]
    if missing:  # the vectors' and a time window's passages
        docs.update(view.lexical.get_docs(missing))
    entries = view.catalog.by_paths(list(cands))
    if tags:
        want = {t.lower().lstrip("#") for t in tags}
        cands = {p: c for p, c in cands.items() if p in entries and want & _tags_of(c, entries[p], docs)}
    features.extract(cands, q, docs, entries, info)
    if view.usage is not None:
        view.usage.refresh()  # a long-lived view (MCP, a benchmark) sees uses logged since it opened
        if view.usage.has_uses:
            now = time.time()
            for c in cands.values():
                e = entries.get(c.path)
                if e is not None and e.kind == "memory" and e.id and c.features is not None:
                    c.features.usage = view.usage.weight(e.id, PARAMS, now)
    for c in cands.values():
        c.score = features.score(c.features, P)
    if semantic and P["w_li"] and info.get("semantic") and late.available(view.embedder):
        t0 = time.perf_counter()
        late.rerank(sorted(cands.values(), key=lambda c: -c.score), q.text, view.embedder, docs, qcache, P)
        info["lateMs"] = round((time.perf_counter() - t0) * 1000, 2)
    for c in cands.values():
        b = features.breakdown(c.features, P)
        c.score, c.details = b.score, features.details(c.features, b)
    _credit_heads(view, cands, entries)
    ranked = sorted(cands.values(), key=lambda c: -c.score)
    if semantic and info.get("semantic") and (model := _reranker(view, qcache)) is not None:
        t0 = time.perf_counter()
        rerank.rerank(ranked, q.text, model, entries, docs, qcache, P, cold_limit=rerank_cold)
        ranked = rerank.fuse(ranked, P, docs=view.lexical.doc_count())
        info["rerankMs"] = round((time.perf_counter() - t0) * 1000, 2)
    return _Ranking(ranked, info, docs, entries)


def _tags_of(c: Cand, e: Entry, docs: dict[str, dict]) -> set[str]:
    """Frontmatter tags and the inline ``#tags`` the index found in the text (on every passage)."""
    out = {str(t).lower() for t in (e.meta.get("tags") or [])}
    d = next((docs[p] for p in c.pids if p in docs), None)
    if d is not None:
        out.update(str(t).lower() for t in d.get("tags") or [])
    return out


def _credit_heads(view: View, cands: dict[str, Cand], entries: dict[str, Entry]) -> None:
    """A question that matches an old version of a memory asks about what that memory says now: the
    old version's evidence counts for its chain's head (each feature at the better of the two), which
    recall shows instead.
    Without this, an evolve split the evidence between two notes and the new head lost to an
    unrelated one (its words and the old version's are not the same)."""
    for c in list(cands.values()):
        f = c.features
        e = entries.get(c.path)
        if f is None or not f.superseded or e is None or e.kind != "memory":
            continue
        head = _head(view.catalog, e, None)
        h = cands.get(head.path)
        if h is None:
            c.score = features.score(dataclasses.replace(f, superseded=False))  # shown as its head by _hits
            continue
        g = h.features
        merged = dataclasses.replace(
            g, lex_rank=_first(g.lex_rank, f.lex_rank), sem_rank=_first(g.sem_rank, f.sem_rank),
            doc_rank=_first(g.doc_rank, f.doc_rank), li_rank=_first(g.li_rank, f.li_rank), lex_norm=max(g.lex_norm, f.lex_norm),
            doc_norm=max(g.doc_norm, f.doc_norm), sem_rel=max(g.sem_rel or 0.0, f.sem_rel or 0.0)
            if g.sem_rel is not None or f.sem_rel is not None else None,
            coverage=max(g.coverage, f.coverage), title_coverage=max(g.title_coverage, f.title_coverage),
            specificity=max(g.specificity, f.specificity))
        full = features.score(merged)
        if full > h.score:
            h.score = full
            h.details["creditedFrom"] = e.id


def _first(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _by_folder(ranked: list[Cand]) -> None:
    """Hierarchical mode: a note in a folder that matches as a whole ranks higher."""
    folders: dict[str, float] = {}
    for c in ranked:
        f = c.path.rsplit("/", 1)[0] if "/" in c.path else ""
        folders[f] = folders.get(f, 0.0) + c.score
    top = max(folders.values()) or 1.0
    for c in ranked:
        fs = folders[c.path.rsplit("/", 1)[0] if "/" in c.path else ""] / top
        c.details["folderScore"] = round(fs, 4)
        c.score *= 1.0 + PARAMS["folder_boost"] * fs
    ranked.sort(key=lambda c: -c.score)


def _unread_may_answer(ranked: list[Cand], q: Query, reason: str) -> str | None:
    """The second model reads Latin-script notes only (search/rerank.py): when it read some of the top
    hits and its gaps say abstain, a top hit it could not read (a Chinese note for an English question)
    is judged as without it, by the first pass's evidence. Without this the reranker's verdict on the
    English notes around it refused the one note that answers (issue 28)."""
    top = abstain_read([c.features for c in ranked if c.features is not None])
    unread = [f for f in top if f.rr_gap is None]
    if not unread or len(unread) == len(top):
        return reason
    return reason if abstain_reason(unread, q) is not None else None


def _versions_until(q: Query) -> int | None:
    """The moment whose memory versions answer: the cutoff, else the end of a window the question names."""
    if q.cutoff is not None:
        return q.cutoff
    # A period ("in January 2025", "in 2024") asks what was true then. A single day ("on 2026-11-03")
    # names an event, and the note recording it (a trade log, its roll-up) is often written later.
    if q.window is not None and q.window[1] - q.window[0] > DAY_S:
        return q.window[1] - 1
    return None


def _head(catalog: Catalog, e: Entry, cutoff: int | None) -> Entry:
    """The newest active version of a chain (or the version current at the cutoff)."""
    from ..store.notes import date_of

    cur = e
    for nxt in walk(catalog, e, "superseded_by"):
        if cur.status != "superseded":
            break
        if cutoff is not None:
            created = date_of(nxt.meta.get("created"))
            if created is not None and created.timestamp() > cutoff:
                break
        cur = nxt
    return cur


def _chain(catalog: Catalog, e: Entry) -> list[dict]:
    """The versions ``e`` replaced, oldest first."""
    return [{"id": p.id, "path": p.path, "status": p.status, "created": p.meta.get("created"), "title": p.title}
            for p in reversed(list(walk(catalog, e, "supersedes")))]


def _hit(view: View, c: Cand, e: Entry | None, r: _Ranking, q: Query, chain: list[dict], detail: str) -> dict:
    path = e.path if e else c.path
    docs = r.docs
    best_pid = max(c.pids, key=lambda p: c.pids[p]) if c.pids else None
    if c.details.get("resolvedFrom"):
        best_doc = next(iter(view.lexical.note_docs(path)), None)
    else:
        best_doc = docs.get(best_pid) if best_pid else None
    if best_doc is None and best_pid:
        best_doc = view.lexical.get_docs([best_pid]).get(best_pid)
    others = [p for p in sorted(c.pids, key=lambda p: -c.pids[p]) if p != best_pid][:2]
    hit: dict[str, Any] = {
        "path": path,
        "id": (e.id if e else "") or None,
        "title": e.title if e else path.rsplit("/", 1)[-1].removesuffix(".md"),
        "kind": e.kind if e else None,
        "type": (e.meta.get("type") if e else None),
        "status": (e.status if e else None) or None,
        "date": (best_doc or {}).get("date"),
        "score": round(c.score, 6),
        "passage": {
            "passageId": (best_doc or {}).get("passage_id"),
            "heading": (best_doc or {}).get("heading", ""),
            "text": _excerpt((best_doc or {}).get("text", ""), detail),
        },
        "passages": [
            {"passageId": p, "heading": docs[p].get("heading", ""), "text": _excerpt(docs[p].get("text", ""), detail)}
            for p in others if p in docs
        ],
        "scoreDetails": c.details,
    }
    if q.history and e is not None and e.status == "superseded":
        hit["historical"] = True
    if chain:
        hit["evolutionChain"] = chain
    if detail == "full" and e is not None:
        hit["content"] = _full_text(view, path)
    return hit


def _hits(view: View, r: _Ranking, q: Query, *, limit: int, drop_ratio: float, abstain: bool, detail: str) -> list[dict]:
    """The ranked notes as hits: weak tails dropped, a superseded memory shown as its chain's head
    (once, and not when the head already ranks above it)."""
    hits: list[dict] = []
    if not r.ranked:
        return hits
    best = r.ranked[0].score
    shown: set[str] = set()
    for rank, c in enumerate(r.ranked):
        if len(hits) >= limit:
            break
        if drop_ratio and c.score < drop_ratio * best:
            break
        if abstain and hits and not fits(c.features, q):
            continue
        e = r.entries.get(c.path)
        resolved = False
        if e is not None and e.copy_of:
            e, resolved = _copy_head(view.catalog, e, c), True
        if e is not None and e.kind == "memory" and e.status == "superseded" and not q.history:
            head = _head(view.catalog, e, _versions_until(q))
            if head.path != c.path:
                if head.path in shown or any(x.path == head.path for x in r.ranked[:rank]):
                    continue
                c.details["resolvedFrom"] = e.id
                e, resolved = head, True
        path = e.path if e else c.path
        if path in shown:
            continue
        shown.add(path)
        chain = _chain(view.catalog, e) if e is not None and (resolved or e.kind == "memory") else []
        hit = _hit(view, c, e, r, q, chain, detail)
        if e is not None and e.dups > 1:
            hit["idConflict"] = _id_conflict(view.catalog, e)
        hits.append(hit)
    return hits


def _copy_head(catalog: Catalog, e: Entry, c: Cand) -> Entry:
    """A sync copy that carries a memory's id is that memory: the hit is its head, shown once."""
    head = catalog.by_paths([e.copy_of]).get(e.copy_of)
    if head is None:
        return e
    c.details["resolvedFrom"] = e.path
    return head


def _id_conflict(catalog: Catalog, e: Entry) -> dict[str, Any]:
    """The notes that share ``e``'s id (a sync conflict): listed on the hit until repaired."""
    return {"copies": [x.path for x in catalog.copies(e)],
            "hint": "one memory in several notes; `hive-brain repair-conflicts` shows them and keeps one"}
def _check_options(*, scope: Any, types: Any, tags: Any, project: Any, limit: Any, detail: Any, mode: Any,
                   drop_ratio: Any, pool: Any, as_of: Any) -> None:
    """Recall's options as the server receives them (any JSON): a wrong type or value is a
    UsageError naming the option, never a TypeError deep in ranking."""
    choices = {"scope": (scope, ("tiered", "agent-memory", "full-vault")), "detail": (detail, ("abstract", "overview", "full")),
               "mode": (mode, (None, "flat", "hierarchical"))}
    for name, (value, allowed) in choices.items():
        if value not in allowed:
            raise UsageError(f"{name} must be one of {', '.join(str(a) for a in allowed if a)}, not {value!r}")
    for name, items in (("types", types), ("tags", tags)):
        if items is None:
            continue
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise UsageError(f"{name} must be a list of strings")
        for x in items:
            check_text(x, f"a value in {name}")
    for name, text in (("project", project), ("as_of", as_of)):
        if text is not None:
            if not isinstance(text, str):
                raise UsageError(f"{name} must be a string")
            check_text(text, f"the {name}")
    for name, num, low in (("limit", limit, 1), ("pool", pool, 1)):
        if isinstance(num, bool) or not isinstance(num, int) or num < low:
            raise UsageError(f"{name} must be a whole number of at least {low}, not {num!r}")
    if isinstance(drop_ratio, bool) or not isinstance(drop_ratio, int | float) or not 0 <= drop_ratio <= 1:
        raise UsageError(f"drop_ratio must be a number between 0 and 1, not {drop_ratio!r}")


def search(view: View, query: str, *, agent: str | None, scope: str = "tiered", types: list[str] | None = None,
           tags: list[str] | None = None, project: str | None = None, limit: int = 10, as_of: str | None = None,
           include_operational: bool = False, detail: str = "full", mode: str | None = None,
           semantic: bool = True, abstain: bool = True, drop_ratio: float = DROP_BELOW, now: Any = None,
           pool: int = CANDIDATES, rerank_cold: int | None = None, alternatives: list[str] | None = None,
           deep: bool = False, _answers: bool = False, _qcache: dict[str, Any] | None = None) -> dict:
    """``alternatives``: other phrasings of the question the asking agent wrote (a rewording, a
    hypothetical answer, key terms): each is ranked as the question is and the rankings are fused
    (:func:`_fuse_alternatives`). ``deep`` (``recall --rerank``, MCP ``deep``): a wider candidate pool and
the second model over the top ``deep_top`` (:func:`deep_params`; late interaction only when ``deep_w_li``
weighs it), after the fast path's verdict on whether the vault answers.
``pool``: passages each ranking contributes before fusion. The prompt hook asks for a smaller
    pool: it shows 6 notes, and half the pool costs nothing at the top (10k: R@5 0.95 either way)
    while saving a quarter of the recall. ``rerank_cold``: the most passages the second model may
    compute for this question (:func:`.rerank.rerank`); None: as many as it reads."""
    t_start = time.perf_counter()
    query = clean_text(query)
    _check_options(scope=scope, types=types, tags=tags, project=project, limit=limit, detail=detail, mode=mode,
                   drop_ratio=drop_ratio, pool=pool, as_of=as_of)
    if view.scan is not None:
        return view.scan.search(query, agent=agent, scope=scope, types=types, tags=tags, project=project, limit=limit,
                                as_of=as_of, include_operational=include_operational, detail=detail, now=now,
                                warnings=view.warnings)
    # A word the vault has never seen, read as the vault spells it (``search.spelling``): the typed
    # question stays the answer's ``query``, the corrected one is what both models search.
    fixes: dict[str, str] = {}
    asked = query
    if PARAMS["spelling"]:
        asked, fixes = spelling.correct(getattr(view, "lexical", None), query)
    q = analyse(asked, now=now, as_of=as_of)
    alts = _check_alternatives(alternatives, query)
    if not isinstance(deep, bool):
        raise UsageError(f"deep must be true or false, not {deep!r}")
    P = deep_params() if deep else PARAMS
    # The question's model runs (e5's vector and token vectors, the second model's vector, the background
    # floors), shared by both tiers and by deep mode's fast verdict: they depend on the text alone.
    qcache: dict[str, Any] = {} if _qcache is None else _qcache
    verdict_ms = None
    if deep and abstain and not _answers:
        # Whether the vault answers is the fast path's verdict: re-ordering a hundred candidates by the
        # second model's cosine lifts the best cosine over the background for off-topic prompts too
        # (smallvault, 511 notes: held off-topic abstention 0.90 -> 0.85 when deep mode decided).
        # Only its verdict is read (hits are not made when it abstains): one short hit, not ten whole notes.
        fast = search(view, query, agent=agent, scope=scope, types=types, tags=tags, project=project, limit=1,
                      as_of=as_of, include_operational=include_operational, detail="abstract", mode=mode,
                      semantic=semantic, abstain=True, drop_ratio=drop_ratio, now=now, pool=pool,
                      rerank_cold=rerank_cold, _qcache=qcache)
        verdict_ms = fast["timing"]["totalMs"]
        if fast["abstained"]:
            return {**fast, "deep": True}
        _answers = True
    if deep:
        pool = max(pool, int(P["deep_pool"]))
    kinds_full = KINDS_ALL + (("operational",) if include_operational else ())
    if semantic:
        _vectors_ahead(view, q.text, qcache)

    def rank(kinds: tuple[str, ...]) -> _Ranking:
        return _rank(view, q, kinds, agent=agent, types=types, tags=tags, project=project, semantic=semantic,
                     pool=max(10, min(int(pool), 1000)), qcache=qcache, rerank_cold=rerank_cold, params=P)

    tier = scope
    if scope == "agent-memory":
        r = rank(("memory",))
    elif scope == "full-vault":
        r = rank(kinds_full)
    else:
        # One search over the whole vault, then the typed-memory tier is read off it: searching
        # memory first and the vault again when that is weak cost two query embeddings and four
        # index searches on the prompt hook's path.
        r = rank(kinds_full)
        typed = [c for c in r.ranked if (e := r.entries.get(c.path)) is not None and e.kind == "memory"]
        weak = memory_is_weak([c.features for c in typed], q)
        tier = "full-vault" if weak else "agent-memory"
        if not weak:
            r.ranked = typed
    if mode == "hierarchical" and r.ranked:
        _by_folder(r.ranked)
    # The late test costs model time for passages not seen before (~60 ms CPU for three): run it only
    # when the other rules (coverage, a clear cosine gap) do not already answer.
    # Not when the second model ranked: its gap decides (abstain.reason), and it is cheaper.
    if (abstain and not _answers and PARAMS["late_abstain"] and r.info.get("semantic") and late.available(view.embedder) and r.ranked
            and r.ranked[0].features.rr_gap is None and late.latin_only(q.text) and abstain_reason([c.features for c in r.ranked], q,
                                                           {**PARAMS, "abstain_gap": PARAMS["abstain_late_cos"]})):
        t0 = time.perf_counter()
        late.judge(r.ranked, q.text, view.embedder, r.docs, qcache)
        r.info["lateJudgeMs"] = round((time.perf_counter() - t0) * 1000, 2)
        for c in r.ranked[: int(PARAMS["abstain_top"])]:
            c.details["lateGap"] = round(c.features.late_gap, 4) if c.features.late_gap is not None else None
    warnings = list(view.warnings)
    if deep:
        for c in r.ranked[: int(P["deep_top"])]:
            c.details["deep"] = True
        if cold := sum(1 for c in r.ranked if c.details.get("rerankCold")):
            warnings.append(rerank.COLD_WARNING.format(n=cold))
    reason = abstain_reason([c.features for c in r.ranked], q) if abstain and not _answers else None
    if reason is not None:
        reason = _unread_may_answer(r.ranked, q, reason)
    if alts and reason is None:
        # Whether the vault answers is the question's own verdict: a hypothetical answer sounds like some
        # note whatever was asked (smallvault's off-topic prompts with their alternatives: abstention
        # 0.95 -> 0.80 when any one answered phrasing answered). The alternatives only re-order.
        rankings = []
        for alt in alts:
            aq = analyse(alt, now=now, as_of=as_of)
            acache: dict[str, Any] = {"rr_model": qcache["rr_model"]} if "rr_model" in qcache else {}
            rankings.append(_rank(view, aq, ("memory",) if tier == "agent-memory" else kinds_full, agent=agent,
                                  types=types, tags=tags, project=project, semantic=semantic,
                                  pool=max(10, min(int(pool), 1000)), qcache=acache, rerank_cold=rerank_cold, params=P))
        r = _fuse_alternatives(r, rankings, P)
    hits = _hits(view, r, q, limit=limit, drop_ratio=drop_ratio, abstain=abstain, detail=detail) if reason is None else []
    conflicts: list[dict] = []
    if hits and agent:
        from ..memory.layers import apply_overrides

        hits, conflicts = apply_overrides(hits, view.catalog, agent, full_text=lambda p: _full_text(view, p))
    return {
        "query": query,
        "hits": hits,
        "conflicts": conflicts,
        "abstained": reason is not None,
        "reason": reason,
        "tier": tier,
        "spelling": fixes,
        "time": q.time.describe(),
        "generation": view.generation,
        "semantic": bool(r.info.get("semantic")),
        "semanticOff": view.semantic_off_reason,
        "deep": deep,
        "warnings": warnings,
        "timing": {**{k: v for k, v in r.info.items() if k.endswith("Ms")},
                   **({"fastVerdictMs": verdict_ms} if verdict_ms is not None else {}),
                   "totalMs": round((time.perf_counter() - t_start) * 1000, 2)},
    }


MAX_ALTERNATIVES = 5


def deep_params() -> dict[str, float]:
    """PARAMS as deep mode ranks: its ``deep_*`` values in place of the fast path's."""
    return {**PARAMS, "rr_top": PARAMS["deep_top"], "li_top": PARAMS["deep_li_top"],
            "li_passages": PARAMS["deep_li_passages"], "w_li": PARAMS["deep_w_li"], "w_late_fuse": PARAMS["deep_w_late"]}


def _check_alternatives(alternatives: Any, query: str) -> list[str]:
    if alternatives is None:
        return []
    if not isinstance(alternatives, list) or not all(isinstance(a, str) for a in alternatives):
        raise UsageError("alternatives must be a list of strings")
    out = [a for a in (clean_text(" ".join(x.split())) for x in alternatives) if a.strip() and a != query]
    if len(out) > MAX_ALTERNATIVES:
        raise UsageError(f"at most {MAX_ALTERNATIVES} alternatives, not {len(out)}")
    return list(dict.fromkeys(out))


def _fuse_alternatives(main: _Ranking, alts: list[_Ranking], params: dict[str, float] = PARAMS) -> _Ranking:
    """Rank fusion of the question's ranking (weight 1) and each alternative's (``w_alt``), over
    ``alt_top`` places of each: a note several phrasings put near the top comes first. A note found
    only by an alternative keeps that ranking's features (its evidence is for that phrasing)."""
    k, top = params["alt_rrf_k"], int(params["alt_top"])
    fused: dict[str, float] = {}
    ranks: dict[str, list[int | None]] = {}
    pick: dict[str, Cand] = {}
    for n, (r, w) in enumerate([(main, 1.0), *((a, params["w_alt"]) for a in alts)]):
        for i, c in enumerate(r.ranked[:top]):
            fused[c.path] = fused.get(c.path, 0.0) + w / (k + i)
            ranks.setdefault(c.path, [None] * (1 + len(alts)))[n] = i
            pick.setdefault(c.path, c)
    order = sorted(pick.values(), key=lambda c: -fused[c.path])
    for c in order:
        c.details.update(alternativesRrf=round(fused[c.path], 5), alternativeRanks=ranks[c.path],
                         questionScore=round(c.score, 6))
        c.score = fused[c.path]
    docs = dict(main.docs)
    entries = dict(main.entries)
    info = dict(main.info)
    for a in alts:
        docs.update(a.docs)
        entries.update(a.entries)
        for key, v in a.info.items():
            if key.endswith("Ms"):
                info[key] = round(info.get(key, 0.0) + v, 2)
    return _Ranking(order, info, docs, entries)


def _reranker(view: View, qcache: dict[str, Any]) -> Any:
    """The second model, looked up once per question (each look-up checks its pack on disk: stat
    calls that cost ~1 ms on a busy machine)."""
    if "rr_model" not in qcache:
        qcache["rr_model"] = rerank.model_for(view.embedder)
    return qcache["rr_model"]


_AHEAD: Any = None  # the threads that run a question's model runs while the index is searched


def _vectors_ahead(view: View, text: str, qcache: dict[str, Any]) -> None:
    """Start the question's model runs (e5's vector and token vectors; the second model's vector where
    it will read the question) on other threads, so they overlap each other and the BM25 searches
    instead of following them: ONNX Runtime releases the GIL while it runs. ``candidates.gather`` and
    ``rerank.rerank`` take the results (``qv_ahead``, ``rr_qv_ahead``). Only with more than one CPU,
    and only when the text is new to this search (a tier re-uses ``qcache``)."""
    global _AHEAD
    if view.embedder is None or view.vectors is None or "qv" in qcache or (os.cpu_count() or 1) < 2:
        return
    if _AHEAD is None:
        from concurrent.futures import ThreadPoolExecutor

        _AHEAD = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hive-brain-question")
    emb = view.embedder
    if hasattr(emb, "embed_query_tokens"):
        qcache["qv_ahead"] = _AHEAD.submit(emb.embed_query_tokens, text)
    if rerank.english(text) and (model := _reranker(view, qcache)) is not None:
        qcache["rr_qv_ahead"] = _AHEAD.submit(lambda: model.embed_queries([text])[0])


def _full_text(view: View, path: str, agent: str | None = None) -> str:
    if view.scan is not None:
        return str(view.scan.full_text(path, agent))
    return "\n\n".join(d["text"] for d in view.lexical.note_docs(path))
