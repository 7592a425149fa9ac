"""Recall: candidates from BM25 and vectors over passages, fused with features into note hits.

Boundaries (layer/agent/kind/type/project/time) are one predicate applied *inside* both the BM25
query and the vector prefilter. Ranking happens at passage level and is aggregated per note (a long
note scores by its best passage, helped a little by other matching passages). Every feature that
moves a note is reported in ``scoreDetails``.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any

from ..index.predicates import And, Eq, In, Not, Or, Pred, Range, all_of
from ..store.catalog import Catalog, Entry
from . import temporal

KINDS_ALL = ("memory", "note", "conversation", "core")
RRF_K = 10.0
CANDIDATES = 120
WINDOW_CANDIDATES = 60  # passages dated inside a named time window, newest first
# Fusion weights, tuned on LoCoMo (benchmarks/locomo.py) — change them only with before/after numbers.
PARAMS: dict[str, float] = {
    "rrf_k": RRF_K,  # smaller = the top of each list matters more
    "w_lex": 1.0,  # weight of the lexical note ranking
    "w_sem": 1.0,  # weight of the semantic note ranking
    "lex_sum": 0.0,  # note lexical score = best passage + lex_sum * other matching passages
    "sem_second": 0.0,  # note semantic score = best passage + sem_second * second best
    "support": 0.0,  # bonus per other strong passage (rank-fused)
    "cov_base": 0.55,  # score multiplier at zero query-term coverage (1.0 at full coverage)
    "linear": 0.3,  # weight of score-based fusion (normalised BM25 + semantic) added to the rank fusion
    "lin_sem": 0.5,  # weight of the semantic part inside the score-based fusion
    "w_doc": 0.5,  # weight of the whole-note BM25 ranking
    "lin_doc": 0.5,  # weight of whole-note BM25 inside the score-based fusion
    "window_boost": 0.3,  # multiplier bonus for notes dated inside a time window named in the question
    "cov_need": 0.0,  # coverage at which the multiplier saturates (0 = by question length)
    "cov_sem": 0.8,  # how much of the needed coverage the best semantic match can stand in for
    "w_win": 0.5,  # weight of the "dated inside the named window" note ranking (newest first)
    "window_after": 3.0,  # days after a named window that still count as inside it (talk about an event comes later)
}
DROP_BELOW = 0.25  # hits scoring under this fraction of the best are dropped


# Reference passages about unrelated everyday and engineering topics. A match must beat the query's
# similarity to these by a margin before semantic evidence alone counts: e5 cosines are compressed
# (0.75-0.92), so a fixed threshold would be meaningless, but "better than noise" is measurable.
BACKGROUND = (
    "Makefile recipes must be indented with tabs, not spaces.", "The staging server restarts every night at 3 am.",
    "Logs are kept for thirty days before rotation.", "Use UTC timestamps in every API response.",
    "The design review happens on Tuesdays.", "Screenshots go in the docs/images folder.",
    "Prefer small pull requests with one change each.", "The printer on the second floor is broken.",
    "Lunch orders close at eleven.", "The team offsite is planned for spring.",
    "Error messages should say what to do next.", "Our office plants need watering twice a week.",
    "Backups are encrypted and stored off-site.", "The marketing site uses a static generator.",
    "Interns start in June.", "Meeting notes are shared after each call.",
    "I went to the beach with my family last summer.", "She adopted a dog from the shelter.",
    "We talked about our favourite books.", "He is training for a marathon.",
    "The museum had a new painting exhibition.", "They celebrated a birthday at a restaurant.",
    "Cooking pasta with fresh tomatoes.", "Learning to play the guitar takes practice.",
)
_background_cache: dict[str, Any] = {}


def background_vectors(embedder: Any) -> Any:
    key = getattr(embedder, "pack_key", id(embedder))
    if key not in _background_cache:
        _background_cache[key] = embedder.embed_passages(list(BACKGROUND))
    return _background_cache[key]


def visibility(agent: str | None) -> Pred:
    """Shared layer plus the caller's own private/task layers; an owner (no agent) reads shared."""
    if not agent:
        return Eq("layer", "shared")
    return Or((Eq("layer", "shared"), And((Eq("agent", agent), In("layer", ("private", "task"))))))


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


@dataclass
class Cand:
    path: str
    lex: float = 0.0
    sem: float = -1.0
    pids: dict[str, float] = field(default_factory=dict)  # passage -> fused passage score
    lex_scores: dict[str, float] = field(default_factory=dict)
    sem_scores: dict[str, float] = field(default_factory=dict)
    lex_note: float = 0.0
    lex_doc: float = 0.0  # BM25 of the whole note
    doc_rank: int | None = None
    sem_note: float = -1.0
    lex_rank: int | None = None
    sem_rank: int | None = None
    win_rank: int | None = None  # rank among the notes dated inside the question's time window
    details: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0


def _query_terms(q: str) -> list[str]:
    from ..index.textproc import content_words

    return list(dict.fromkeys(content_words(q)))


def _coverage_terms(query: str, ti: temporal.TimeIntent) -> list[str]:
    """The question's words a note should contain. A time phrase is served by its window or cutoff:
    a note need not repeat "3 June 2023" to cover the question (the words still search)."""
    terms = _query_terms(query)
    if ti.phrase and (ti.window or ti.cutoff):
        time_terms = set(_query_terms(ti.phrase))
        terms = [t for t in terms if t not in time_terms] or terms
    return terms


def _content_set(text: str) -> frozenset[str]:
    from ..index.textproc import content_words

    return frozenset(content_words(text))


# Passages: the same ones come back for similar questions. Titles and tag lists: short, and every
# candidate needs them on every recall, so a larger cache pays (a few MB at 32k titles) where
# re-analysing them was a fifth of a 10k recall.
_terms_of = functools.lru_cache(maxsize=4096)(_content_set)
_head_terms_of = functools.lru_cache(maxsize=32768)(_content_set)


def build_where(*, agent: str | None, kinds: tuple[str, ...], types: list[str] | None = None, project: str | None = None,
                include_archived: bool = False, cutoff: int | None = None) -> Pred:
    parts: list[Pred | None] = [visibility(agent), In("kind", kinds)]
    if types:
        parts.append(In("type", tuple(types)))
    if project:
        parts.append(Eq("project", project))
    if not include_archived:
        parts.append(Not(Eq("status", "archived")))
    if cutoff is not None:
        parts.append(Range("date", hi=cutoff))
    p = all_of(*parts)
    assert p is not None
    return p


def _candidates(view: View, query: str, where: Pred, *, semantic: bool, qcache: dict[str, Any] | None = None,
                pool: int = CANDIDATES) -> tuple[dict[str, Cand], dict[str, Any]]:
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    lex_hits = view.lexical.search(query, where=And((where, In("unit", ("passage", "whole")))), limit=pool)
    note_hits = view.lexical.search(query, where=And((where, In("unit", ("note", "whole")))), limit=pool)
    from ..index.textproc import content_words

    info["term_weights"] = view.lexical.term_weights(list(dict.fromkeys(content_words(query))))
    info["lexical_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    cands: dict[str, Cand] = {}
    for h in note_hits:
        cands.setdefault(h.note_path, Cand(h.note_path)).lex_doc = h.score
    for h in lex_hits:
        c = cands.setdefault(h.note_path, Cand(h.note_path))
        if h.score > c.lex:
            c.lex = h.score
        c.pids[h.passage_id] = max(c.pids.get(h.passage_id, 0.0), h.score)
        c.lex_scores[h.passage_id] = h.score
    sem_hits = []
    if semantic and view.vectors is not None and view.embedder is not None:
        t0 = time.perf_counter()
        # Tiered recall searches twice: embed the question (and compare it to background) once.
        qc = qcache if qcache is not None else {}
        if "qv" not in qc:
            qc["qv"] = view.embedder.embed_queries([query])[0]
            bg = sorted((background_vectors(view.embedder) @ qc["qv"]).tolist(), reverse=True)
            qc["background_top3"] = sum(bg[:3]) / 3
        sem_hits = view.vectors.search(qc["qv"], where=where, limit=pool)
        info["background_top3"] = qc["background_top3"]
        info["semantic_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    info["semantic"] = bool(sem_hits) or (semantic and view.vectors is not None and view.embedder is not None)
    sims = [h.similarity for h in sem_hits]
    # A conversation window (`<passage>~w<n>`) scores for the passage it comes from.
    sem_pairs = [(h.passage_id.split("~", 1)[0], h) for h in sem_hits]
    for pid, h in sem_pairs:
        c = cands.setdefault(h.note_path, Cand(h.note_path))
        if h.similarity > c.sem:
            c.sem = h.similarity
        c.sem_scores[pid] = max(h.similarity, c.sem_scores.get(pid, -1.0))
    # Passage-level fused score (for picking the best passage to show): rank-based.
    lex_rank_p = {h.passage_id: i for i, h in enumerate(lex_hits)}
    sem_rank_p: dict[str, int] = {}
    for i, (pid, _h) in enumerate(sem_pairs):
        sem_rank_p.setdefault(pid, i)
    for pid, h in sem_pairs:
        cands[h.note_path].pids.setdefault(pid, 0.0)
    for c in cands.values():
        for pid in c.pids:
            s = 0.0
            if pid in lex_rank_p:
                s += 1.0 / (RRF_K + lex_rank_p[pid])
            if pid in sem_rank_p:
                s += 1.0 / (RRF_K + sem_rank_p[pid])
            c.pids[pid] = s
    info["sim_stats"] = _stats(sims)
    info["lex_max"] = lex_hits[0].score if lex_hits else 0.0
    return cands, info


def _window_candidates(view: View, cands: dict[str, Cand], where: Pred, window: tuple[int, int]) -> None:
    """Notes dated inside a window the question names are candidates even when they share no word
    with it: "what did we talk about last Saturday" asks for that day's conversations. Only notes
    dated strictly inside count here (the after-window grace only boosts notes found otherwise)."""
    rng = And((where, In("unit", ("passage", "whole")), Range("date", lo=window[0], hi=window[1] - 1)))
    rank: dict[str, int] = {}
    for h in view.lexical.matching(rng, limit=WINDOW_CANDIDATES):
        c = cands.setdefault(h.note_path, Cand(h.note_path))
        c.pids.setdefault(h.passage_id, 0.0)
        if h.note_path not in rank:
            rank[h.note_path] = c.win_rank = len(rank)


def _stats(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    xs = sorted(xs, reverse=True)
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs)) or 1e-6
    return {"max": xs[0], "mean": mean, "sd": sd, "median": xs[len(xs) // 2]}


def _fuse(cands: dict[str, Cand], q_terms: list[str], docs: dict[str, dict], entries: dict[str, Entry],
          info: dict[str, Any], ti: temporal.TimeIntent, query: str, window: tuple[int, int] | None = None) -> None:
    P = PARAMS
    weights = info.get("term_weights") or {}
    for c in cands.values():
        lex_ps = sorted((v for v in c.lex_scores.values()), reverse=True)
        c.lex_note = (lex_ps[0] + P["lex_sum"] * sum(lex_ps[1:])) if lex_ps else 0.0
        sem_ps = sorted(c.sem_scores.values(), reverse=True)
        c.sem_note = (sem_ps[0] + P["sem_second"] * (sem_ps[1] if len(sem_ps) > 1 else sem_ps[0])) if sem_ps else -1.0
    by_lex = sorted((c for c in cands.values() if c.lex_note > 0), key=lambda c: -c.lex_note)
    by_doc = sorted((c for c in cands.values() if c.lex_doc > 0), key=lambda c: -c.lex_doc)
    for i, c in enumerate(by_doc):
        c.doc_rank = i
    doc_max = by_doc[0].lex_doc if by_doc else 1.0
    by_sem = sorted((c for c in cands.values() if c.sem_note > -1), key=lambda c: -c.sem_note)
    for i, c in enumerate(by_lex):
        c.lex_rank = i
    for i, c in enumerate(by_sem):
        c.sem_rank = i
    lex_max = max((c.lex_note for c in by_lex), default=0.0) or 1.0
    sims = info.get("sim_stats")
    sem_top = by_sem[0].sem_note if by_sem else 0.0
    sem_floor = info.get("background_top3", sims["median"] if sims else 0.0)
    qnorm = " ".join(query.lower().split()).strip(" ?!.")
    q_weighted = [(t, weights.get(t, 1.0)) for t in q_terms]
    q_total = sum(w for _t, w in q_weighted) or 1.0
    for c in cands.values():
        e = entries.get(c.path)
        rrf = 0.0
        if c.lex_rank is not None:
            rrf += P["w_lex"] / (P["rrf_k"] + c.lex_rank)
        if c.sem_rank is not None:
            rrf += P["w_sem"] / (P["rrf_k"] + c.sem_rank)
        if c.doc_rank is not None:
            rrf += P["w_doc"] / (P["rrf_k"] + c.doc_rank)
        if c.win_rank is not None:
            rrf += P["w_win"] / (P["rrf_k"] + c.win_rank)
        if P["linear"]:
            lin = c.lex_note / lex_max + P["lin_doc"] * c.lex_doc / doc_max
            if c.sem_note > -1 and sem_top > sem_floor:
                lin += P["lin_sem"] * max(0.0, (c.sem_note - sem_floor) / (sem_top - sem_floor))
            rrf += P["linear"] * lin
        # Other matching passages help a little (a note that answers in several places).
        extra = sorted(c.pids.values(), reverse=True)[1:4]
        support = P["support"] * sum(extra)
        title = (e.title if e else "") or ""
        title_terms = _head_terms_of(title)
        tags = " ".join(str(x) for x in ((e.meta.get("tags") or []) if e else []))
        head_terms = (title_terms | _head_terms_of(tags)) if tags else title_terms
        # Coverage of the question by the note's best passage (plus title/tags), weighting each
        # question word by its rarity: a name that is in every note of a person says little.
        cov = 0.0
        if q_terms:
            head_w = sum(w for t, w in q_weighted if t in head_terms)
            rest = [(t, w) for t, w in q_weighted if t not in head_terms]
            # The passages BM25 matched hold the note's word overlap; analysing every passage the
            # vectors found too was a third of a 10k recall. With no lexical match, look at all.
            best = 0.0
            for p in (c.lex_scores or c.pids):
                d = docs.get(p)
                if d is None:
                    continue
                pt = _terms_of(d["text"])
                v = sum(w for t, w in rest if t in pt)
                if v > best:
                    best = v
                    if head_w + best >= q_total:
                        break
            cov = (head_w + best) / q_total
        title_cov = (sum(1 for t in q_terms if t in title_terms) / len(q_terms)) if q_terms else 0.0
        exact = 1.0 if title and (title.lower() == qnorm or (len(title) > 3 and title.lower() in qnorm)) else 0.0
        key = (e.memory_key if e else "") or ""
        key_match = 1.0 if key and key.split("/")[-1].replace("-", " ") in qnorm else 0.0
        aliases = [str(a).lower() for a in ((e.meta.get("aliases") or []) if e else [])]
        alias_match = 1.0 if any(a and a in qnorm for a in aliases) else 0.0
        status = e.status if e else ""
        conf = e.meta.get("confidence") if e else None
        try:
            conf_f = float(conf) if conf is not None else 0.8
        except (TypeError, ValueError):
            conf_f = 0.8
        # Longer questions need proportionally more of their words present.
        need = P["cov_need"] or (0.6 if len(q_terms) >= 6 else 0.4)
        # A passage that says the same thing in other words is covered by meaning, not by words: a
        # strong semantic match stands in for part of the missing coverage. Ranking only; abstention
        # and `_fits` still read the lexical coverage.
        cov_rank = cov
        if c.sem_note > -1 and sem_top > sem_floor:
            cov_rank = max(cov, P["cov_sem"] * need * max(0.0, (c.sem_note - sem_floor) / (sem_top - sem_floor)))
        coverage_factor = P["cov_base"] + (1 - P["cov_base"]) * min(1.0, cov_rank / need) if q_terms else 1.0
        mult = coverage_factor
        mult *= 1.0 + 0.25 * title_cov + 0.3 * exact + 0.2 * key_match + 0.3 * alias_match
        mult *= 0.9 + 0.1 * conf_f
        if status == "superseded" and not ti.history and ti.cutoff is None:
            mult *= 0.6
        in_window = None
        if window is not None:
            d = next((docs[p]["date"] for p in c.pids if p in docs), None)
            in_window = d is not None and window[0] <= d <= window[1] + P["window_after"] * 86400
            if in_window:
                mult *= 1.0 + P["window_boost"]
        c.score = (rrf + support) * mult
        c.details = {
            "bm25": round(c.lex, 4), "bm25Rank": c.lex_rank, "bm25Note": round(c.lex_doc, 4), "bm25NoteRank": c.doc_rank, "bm25Norm": round(c.lex / lex_max, 4) if c.lex else 0.0,
            "semantic": round(c.sem, 4) if c.sem > -1 else None, "semanticRank": c.sem_rank,
            "semanticZ": round((c.sem - sims["mean"]) / sims["sd"], 3) if sims and c.sem > -1 else None,
            "semanticGap": round(c.sem - info["background_top3"], 4) if c.sem > -1 and "background_top3" in info else None,
            "rrf": round(rrf, 5), "support": round(support, 5), "coverage": round(cov, 3), "titleCoverage": round(title_cov, 3),
            "exactTitle": exact, "keyMatch": key_match, "aliasMatch": alias_match, "confidence": conf_f,
            "status": status, "inWindow": in_window, "windowRank": c.win_rank, "multiplier": round(mult, 4),
        }


def _abstain(ranked: list[Cand], q_terms: list[str], info: dict[str, Any]) -> str | None:
    """Why nothing fits (or None). Needs both signals weak: lexical coverage and semantic separation."""
    if not ranked:
        return "no note matches the question"
    top = ranked[:3]
    if _time_only(q_terms) and any(c.win_rank is not None for c in top):
        return None  # the question asks about a time, and notes from that time are there
    cov = max(c.details["coverage"] for c in top)
    gaps = [c.details.get("semanticGap") for c in top if c.details.get("semanticGap") is not None]
    gap = max(gaps) if gaps else None
    if cov >= 0.5:
        return None
    if gap is not None and (gap >= 0.03 or (cov >= 0.34 and gap >= 0.015)):
        return None
    if not q_terms and gap is None:
        return "the question has no searchable words"
    return f"best match covers {cov:.0%} of the question's words" + (
        f" and is only {gap:+.3f} above unrelated text semantically" if gap is not None else " (lexical search only)")


def _time_only(q_terms: list[str]) -> bool:
    """Besides its time phrase, the question says little ("what did we talk about last Saturday"):
    being from that time is then evidence enough. "Finish the refactor today" still needs its words."""
    return len(q_terms) <= 1


def _fits(c: Cand, q_terms: list[str]) -> bool:
    """A hit after the first must stand on its own evidence, not just be the nearest noise."""
    d = c.details
    gap = d.get("semanticGap")
    if c.win_rank is not None and _time_only(q_terms):
        return True
    return d["coverage"] >= 0.34 or (gap is not None and gap >= 0.025)


def _head(catalog: Catalog, e: Entry, cutoff_ts: int | None) -> Entry:
    """The newest active version of a chain (or the version current at the cutoff)."""
    from ..store.notes import date_of

    cur, seen = e, set()
    while cur.status == "superseded" and cur.meta.get("superseded_by") and cur.id not in seen:
        seen.add(cur.id)
        nxt = catalog.by_id(str(cur.meta["superseded_by"]))
        if nxt is None:
            break
        if cutoff_ts is not None:
            created = date_of(nxt.meta.get("created"))
            if created is not None and created.timestamp() > cutoff_ts:
                break
        cur = nxt
    return cur


def _chain(catalog: Catalog, e: Entry) -> list[dict]:
    out, cur, seen = [], e, set()
    while cur is not None and cur.meta.get("supersedes") and cur.id not in seen:
        seen.add(cur.id)
        prev = catalog.by_id(str(cur.meta["supersedes"]))
        if prev is None:
            break
        out.append({"id": prev.id, "path": prev.path, "status": prev.status, "created": prev.meta.get("created"),
                    "title": prev.title})
        cur = prev
    return list(reversed(out))


def _excerpt(text: str, detail: str) -> str:
    text = text.strip()
    if detail == "abstract":
        first = text.split("\n\n", 1)[0]
        return first[:280] + ("…" if len(first) > 280 else "")
    if detail == "overview":
        return text[:1200] + ("…" if len(text) > 1200 else "")
    return text


def search(view: View, query: str, *, agent: str | None, scope: str = "tiered", types: list[str] | None = None,
           tags: list[str] | None = None, project: str | None = None, limit: int = 10, as_of: str | None = None,
           include_operational: bool = False, detail: str = "overview", mode: str | None = None,
           semantic: bool = True, abstain: bool = True, drop_ratio: float = DROP_BELOW, now: Any = None,
           pool: int = CANDIDATES) -> dict:
    """``pool``: passages each ranking contributes before fusion. The prompt hook asks for a smaller
    pool: it shows 6 notes, and half the pool costs nothing at the top (10k: R@5 0.95 either way)
    while saving a quarter of the recall."""
    t_start = time.perf_counter()
    ti = temporal.parse(query, now=now)
    if as_of:
        from ..store.notes import date_of

        d = date_of(as_of)
        if d is None:
            from ..errors import UsageError

            raise UsageError(f"--as-of {as_of!r} is not a date", hint="use YYYY-MM-DD")
        ti.cutoff = d.replace(hour=23, minute=59, second=59)
    cutoff = int(ti.cutoff.timestamp()) if ti.cutoff else None
    window = (int(ti.window[0].timestamp()), int(ti.window[1].timestamp())) if ti.window else None
    kinds_full = KINDS_ALL + (("operational",) if include_operational else ())
    q_terms = _coverage_terms(query, ti)
    qcache: dict[str, Any] = {}

    def run(kinds: tuple[str, ...]) -> tuple[list[Cand], dict[str, Any], dict[str, dict], dict[str, Entry]]:
        where = build_where(agent=agent, kinds=kinds, types=types, project=project, include_archived=False,
                            cutoff=cutoff)
        cands, info = _candidates(view, query, where, semantic=semantic, qcache=qcache,
                                  pool=max(10, min(int(pool), 1000)))
        if window is not None:
            _window_candidates(view, cands, where, window)
        pids = [p for c in cands.values() for p in c.pids]
        docs = view.lexical.get_docs(pids) if pids else {}
        entries = view.catalog.by_paths(list(cands))
        if tags:
            want = {t.lower() for t in tags}
            cands = {p: c for p, c in cands.items() if want & {str(t).lower() for t in (entries[p].meta.get("tags") or [])}
                     if p in entries}
        _fuse(cands, q_terms, docs, entries, info, ti, query, window)
        ranked = sorted(cands.values(), key=lambda c: -c.score)
        return ranked, info, docs, entries

    tier = scope
    if scope == "agent-memory":
        ranked, info, docs, entries = run(("memory",))
    elif scope == "full-vault":
        ranked, info, docs, entries = run(kinds_full)
    else:
        # One search over the whole vault, then the typed-memory tier is read off it: searching
        # memory first and the vault again when that is weak cost two query embeddings and four
        # index searches on the prompt hook's path.
        ranked, info, docs, entries = run(kinds_full)
        typed = [c for c in ranked if (e := entries.get(c.path)) is not None and e.kind == "memory"]
        weak = not typed or _abstain(typed, q_terms, info) is not None or typed[0].details["coverage"] < 0.5
        tier = "full-vault" if weak else "agent-memory"
        if not weak:
            ranked = typed

    if mode == "hierarchical" and ranked:
        folders: dict[str, float] = {}
        for c in ranked:
            f = c.path.rsplit("/", 1)[0] if "/" in c.path else ""
            folders[f] = folders.get(f, 0.0) + c.score
        top = max(folders.values()) or 1.0
        for c in ranked:
            fs = folders[c.path.rsplit("/", 1)[0] if "/" in c.path else ""] / top
            c.details["folderScore"] = round(fs, 4)
            c.score *= 1.0 + 0.2 * fs
        ranked.sort(key=lambda c: -c.score)

    reason = _abstain(ranked, q_terms, info) if abstain else None
    hits: list[dict] = []
    if reason is None and ranked:
        best = ranked[0].score
        seen_heads: set[str] = set()
        for rank, c in enumerate(ranked):
            if len(hits) >= limit:
                break
            if drop_ratio and c.score < drop_ratio * best:
                break
            if abstain and hits and not _fits(c, q_terms):
                continue
            e = entries.get(c.path)
            chain: list[dict] = []
            if e is not None and e.kind == "memory" and e.status == "superseded" and not ti.history:
                head = _head(view.catalog, e, cutoff)
                if head.path != c.path:
                    if head.path in seen_heads or any(r.path == head.path for r in ranked[:rank]):
                        continue
                    chain = _chain(view.catalog, head)
                    c.details["resolvedFrom"] = e.id
                    e = head
            path = e.path if e else c.path
            if path in seen_heads:
                continue
            seen_heads.add(path)
            best_pid = max(c.pids, key=lambda p: c.pids[p]) if c.pids else None
            if c.details.get("resolvedFrom"):
                head_pids = view.lexical.note_passages(path)[:1]
                hd = view.lexical.get_docs(head_pids)
                best_doc = hd.get(head_pids[0]) if head_pids else None
            else:
                best_doc = docs.get(best_pid) if best_pid else None
            if best_doc is None and best_pid:
                best_doc = view.lexical.get_docs([best_pid]).get(best_pid)
            others = [p for p in sorted(c.pids, key=lambda p: -c.pids[p]) if p != best_pid][:2]
            if e is not None and e.kind == "memory" and not chain and e.meta.get("supersedes"):
                chain = _chain(view.catalog, e)
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
                    "passage_id": (best_doc or {}).get("passage_id"),
                    "heading": (best_doc or {}).get("heading", ""),
                    "text": _excerpt((best_doc or {}).get("text", ""), detail),
                },
                "passages": [
                    {"passage_id": p, "heading": docs[p].get("heading", ""), "text": _excerpt(docs[p].get("text", ""), detail)}
                    for p in others if p in docs
                ],
                "scoreDetails": c.details,
            }
            if ti.history and e is not None and e.status == "superseded":
                hit["historical"] = True
            if chain:
                hit["evolutionChain"] = chain
            if detail == "full" and e is not None:
                hit["content"] = _full_text(view, path)
            hits.append(hit)
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
        "time": ti.describe(),
        "generation": view.generation,
        "semantic": bool(info.get("semantic")),
        "semanticOff": view.semantic_off_reason,
        "warnings": list(view.warnings),
        "timing": {**{k: v for k, v in info.items() if k.endswith("_ms")}, "total_ms": round((time.perf_counter() - t_start) * 1000, 2)},
    }


def _full_text(view: View, path: str) -> str:
    pids = view.lexical.note_passages(path)
    docs = view.lexical.get_docs(pids)
    return "\n\n".join(docs[p]["text"] for p in pids if p in docs)
