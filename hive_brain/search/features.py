"""Ranking as a function: every candidate becomes a :class:`Features` record, and
``score(features, params)`` turns it into a number with no index, catalog or model in sight.

Extraction needs the whole candidate set (ranks, the best scores that normalise, the semantic floor),
the question, the catalog entry and the passages' text; scoring needs only the record and ``PARAMS``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..store.catalog import Entry
from .candidates import Cand
from .params import PARAMS
from .query import Query

if TYPE_CHECKING:
    from ..index.lexical import LexicalIndex


@dataclass(slots=True)
class Features:
    # Ranks among the candidates (0 = first; None = not in that ranking).
    lex_rank: int | None = None  # note lexical score (best passage BM25, see `lex_sum`)
    sem_rank: int | None = None  # note semantic score (best passage cosine, see `sem_second`)
    doc_rank: int | None = None  # whole-note BM25
    win_rank: int | None = None  # dated inside the question's window, newest first
    li_rank: int | None = None  # late interaction (MaxSim over token vectors) among the top `li_top`
    rr_rank: int | None = None  # the second model's (search/rerank.py) place among the top `rr_top`
    # Scores normalised by the best candidate's.
    lex_norm: float = 0.0
    doc_norm: float = 0.0
    sem_rel: float | None = None  # (cosine - floor) / (best - floor), >= 0; None: no semantic evidence above noise
    passages: tuple[float, ...] = ()  # the note's rank-fused passage scores, best first
    # The question's words in the note.
    n_terms: int = 0
    coverage: float = 0.0  # rarity-weighted share found in the best passage plus title and tags
    title_coverage: float = 0.0
    # How specific the words the note shares with the question are, against the vault's own vocabulary:
    # the rarest shared word's IDF over the rarest possible (a word in one passage of the index), 0 when
    # it shares none. "Write a test" shares "test" with any testing note: a common word, a low value.
    specificity: float = 0.0
    exact_title: float = 0.0
    key_match: float = 0.0
    alias_match: float = 0.0
    question_match: float = 0.0  # best rarity-weighted share of the question's words in one of the writer's `questions`
    confidence: float = 0.8
    superseded: bool = False  # a replaced version, and the question asks neither about the past nor as of a date
    in_window: bool | None = None  # None: the question names no window
    time_only: bool = False  # the question asks about its time alone ("what did we do last Saturday")
    usage: float = 0.0  # how much answers on this device used the memory, in [0, 1] (memory.usage)
    # Reported in scoreDetails only.
    status: str | None = ""
    bm25: float = 0.0
    bm25_note: float = 0.0
    bm25_norm: float = 0.0
    semantic: float | None = None
    semantic_z: float | None = None
    gap: float | None = None  # best cosine minus the background floor
    floor_allowance: float = 0.0  # the part of that floor that grows with the index (candidates.size_allowance)
    late: float | None = None  # MaxSim of the question's and the note's best passage's token vectors
    late_gap: float | None = None  # MaxSim of the best passage minus the background's (abstention's top hits)
    rr_sim: float | None = None  # the second model's cosine with the note's best passage, or with one of the
    # writer's questions when nearer (`rr_question_sim`)
    rr_question_sim: float | None = None
    rr_gap: float | None = None  # ... minus its cosine with the nearest background sentences
    question_sim: float | None = None  # cosine of the nearest of the writer's questions/aliases (ranked in `semantic`)


class Breakdown(NamedTuple):
    rrf: float  # rank fusion plus the score-based part
    support: float
    multiplier: float
    score: float


def breakdown(f: Features, params: Mapping[str, float] = PARAMS) -> Breakdown:
    P = params
    rrf = 0.0
    if f.lex_rank is not None:
        rrf += P["w_lex"] / (P["rrf_k"] + f.lex_rank)
    if f.sem_rank is not None:
        rrf += P["w_sem"] / (P["rrf_k"] + f.sem_rank)
    if f.doc_rank is not None:
        rrf += P["w_doc"] / (P["rrf_k"] + f.doc_rank)
    # A question about a time alone ("what did we do last Saturday") is answered by that day's notes:
    # their place in the window is then most of the evidence, and its one other word ("do", "work")
    # is not a word they need to contain.
    dated_answer = f.time_only and f.win_rank is not None
    if f.win_rank is not None:
        rrf += (P["w_win"] + P["w_win_time_only"] * dated_answer) / (P["rrf_k"] + f.win_rank)
    if f.li_rank is not None:
        rrf += P["w_li"] / (P["rrf_k"] + f.li_rank)
    if P["linear"]:
        lin = f.lex_norm + P["lin_doc"] * f.doc_norm
        if f.sem_rel is not None:
            lin += P["lin_sem"] * f.sem_rel
        rrf += P["linear"] * lin
    # Other matching passages help a little (a note that answers in several places).
    support = P["support"] * sum(f.passages[1:1 + int(P["support_passages"])])
    mult = 1.0
    if f.n_terms:
        need = P["cov_need"] or (P["cov_need_long"] if f.n_terms >= P["cov_long_terms"] else P["cov_need_short"])
        # A passage that says the same thing in other words is covered by meaning, not by words: a
        # strong semantic match stands in for part of the missing coverage. Ranking only; abstention
        # still reads the lexical coverage.
        cov = need if dated_answer else f.coverage
        if f.sem_rel is not None:
            cov = max(cov, P["cov_sem"] * need * f.sem_rel)
        mult = P["cov_base"] + (1 - P["cov_base"]) * min(1.0, cov / need)
        # Past saturation, the words still count: the only note with a rare word of the question
        # ("zorbulator cache") must beat one that has only the common word in its title.
        mult *= 1.0 + P["w_cov_full"] * f.coverage
    mult *= (1.0 + P["w_title_cov"] * f.title_coverage + P["w_exact_title"] * f.exact_title
             + P["w_key"] * f.key_match + P["w_alias"] * f.alias_match + P["w_question"] * f.question_match)
    mult *= P["conf_base"] + P["w_conf"] * f.confidence
    if f.superseded:
        mult *= P["superseded"]
    if f.in_window:
        mult *= 1.0 + P["window_boost"]
    if f.usage:
        # Capped: at most w_usage of the note's own score, so usage reorders near-ties only and a
        # note that matches better by more than that is never passed, whatever the counts.
        mult *= 1.0 + P["w_usage"] * min(1.0, f.usage)
    return Breakdown(rrf, support, mult, (rrf + support) * mult)


def score(f: Features, params: Mapping[str, float] = PARAMS) -> float:
    return breakdown(f, params).score


def details(f: Features, b: Breakdown) -> dict[str, Any]:
    """``scoreDetails``: every feature that moved the note."""
    return {
        "bm25": round(f.bm25, 4), "bm25Rank": f.lex_rank, "bm25Note": round(f.bm25_note, 4),
        "bm25NoteRank": f.doc_rank, "bm25Norm": round(f.bm25_norm, 4),
        "semantic": round(f.semantic, 4) if f.semantic is not None else None, "semanticRank": f.sem_rank,
        "semanticZ": round(f.semantic_z, 3) if f.semantic_z is not None else None,
        "semanticGap": round(f.gap, 4) if f.gap is not None else None,
        "floorAllowance": round(f.floor_allowance, 4),
        "rrf": round(b.rrf, 5), "support": round(b.support, 5), "coverage": round(f.coverage, 3),
        "titleCoverage": round(f.title_coverage, 3), "specificity": round(f.specificity, 3), "exactTitle": f.exact_title, "keyMatch": f.key_match,
        "aliasMatch": f.alias_match, "questionMatch": round(f.question_match, 3),
        "questionSim": round(f.question_sim, 4) if f.question_sim is not None else None, "confidence": f.confidence, "status": f.status, "inWindow": f.in_window,
        "windowRank": f.win_rank, "usage": round(f.usage, 4), "multiplier": round(b.multiplier, 4),
        "lateInteraction": round(f.late, 4) if f.late is not None else None, "lateRank": f.li_rank,
        "lateGap": round(f.late_gap, 4) if f.late_gap is not None else None,
        "rerankRank": f.rr_rank, "rerankSim": round(f.rr_sim, 4) if f.rr_sim is not None else None,
    }


def _content_set(text: str) -> frozenset[str]:
    from ..index.textproc import content_words

    return frozenset(content_words(text))


# Passages: the same ones come back for similar questions, and a warm server analyses every
# non-conversation passage ahead of questions (:func:`warm_terms`): at 10k notes re-analysing the
# candidates' passages was a quarter of the prompt op (22 of 122 ms, loaded), ~3 KB a passage kept.
# Titles and tag lists: short, and every candidate needs them on every recall, so a larger cache pays
# (a few MB at 32k titles) where re-analysing them was a fifth of a 10k recall.
_terms_of = functools.lru_cache(maxsize=65536)(_content_set)
_head_terms_of = functools.lru_cache(maxsize=32768)(_content_set)


def warm_terms(lexical: LexicalIndex, entries: Iterable[Entry]) -> int:
    """Analyse these notes' passages (and titles) for coverage before any question needs them (the
    server's idle read-ahead, beside the second model's); returns how many passages were read."""
    n = 0
    for e in entries:
        for d in lexical.note_docs(e.path):
            _terms_of(d["text"])
            n += 1
        _head_terms_of(e.title or "")
    return n


def extract(cands: Mapping[str, Cand], query: Query, docs: Mapping[str, dict], entries: Mapping[str, Entry],
            info: Mapping[str, Any], params: Mapping[str, float] = PARAMS) -> None:
    """Set ``c.features`` on every candidate."""
    P = params
    lex_note: dict[str, float] = {}
    sem_note: dict[str, float] = {}
    for c in cands.values():
        lex_ps = sorted(c.lex_scores.values(), reverse=True)
        lex_note[c.path] = (lex_ps[0] + P["lex_sum"] * sum(lex_ps[1:])) if lex_ps else 0.0
        sem_ps = sorted(c.sem_scores.values(), reverse=True)
        sem_note[c.path] = (sem_ps[0] + P["sem_second"] * (sem_ps[1] if len(sem_ps) > 1 else sem_ps[0])) if sem_ps else -1.0
    by_lex = sorted((c for c in cands.values() if lex_note[c.path] > 0), key=lambda c: -lex_note[c.path])
    by_doc = sorted((c for c in cands.values() if c.lex_doc > 0), key=lambda c: -c.lex_doc)
    by_sem = sorted((c for c in cands.values() if sem_note[c.path] > -1), key=lambda c: -sem_note[c.path])
    lex_rank = {c.path: i for i, c in enumerate(by_lex)}
    doc_rank = {c.path: i for i, c in enumerate(by_doc)}
    sem_rank = {c.path: i for i, c in enumerate(by_sem)}
    doc_max = by_doc[0].lex_doc if by_doc else 1.0
    lex_max = max((lex_note[c.path] for c in by_lex), default=0.0) or 1.0
    sims = info.get("sim_stats")
    sem_top = sem_note[by_sem[0].path] if by_sem else 0.0
    sem_floor = info.get("background_top3", sims["median"] if sims else 0.0)
    weights = info.get("term_weights") or {}
    q_weighted = [(t, weights.get(t, 1.0)) for t in query.terms]
    q_total = sum(w for _t, w in q_weighted) or 1.0
    # The rarest a word can be here: in one passage (term_weights' IDF at df = 1).
    idf_top = math.log(1.0 + max(1, int(info.get("n_docs") or 1)) / 2.0) or 1.0
    for c in cands.values():
        e = entries.get(c.path)
        f = Features(lex_rank=lex_rank.get(c.path), sem_rank=sem_rank.get(c.path), doc_rank=doc_rank.get(c.path),
                     win_rank=c.win_rank, n_terms=len(query.terms), time_only=query.time_only(P))
        f.lex_norm = lex_note[c.path] / lex_max
        f.doc_norm = c.lex_doc / doc_max
        if sem_note[c.path] > -1 and sem_top > sem_floor:
            f.sem_rel = max(0.0, (sem_note[c.path] - sem_floor) / (sem_top - sem_floor))
        f.passages = tuple(sorted(c.pids.values(), reverse=True))
        _words(f, c, e, query, q_weighted, q_total, docs, P, idf_top)
        _note(f, c, e, query, docs, P)
        f.bm25, f.bm25_note = c.lex, c.lex_doc
        f.floor_allowance = float(info.get("floor_allowance") or 0.0)
        f.bm25_norm = c.lex / lex_max if c.lex else 0.0
        if c.name_sem > -1:
            f.question_sim = c.name_sem
        if c.sem > -1:
            f.semantic = c.sem
            if sims:
                f.semantic_z = (c.sem - sims["mean"]) / sims["sd"]
            if "background_top3" in info:
                f.gap = c.sem - info["background_top3"]
        elif sims and "background_top3" in info:
            # The vectors ran and did not find this note: it is no nearer than the last one they found.
            # Without this bound such a hit (a word match only) was judged as if there were no model.
            f.gap = sims["min"] - info["background_top3"]
        c.features = f


def _words(f: Features, c: Cand, e: Entry | None, query: Query, q_weighted: list[tuple[str, float]], q_total: float,
           docs: Mapping[str, dict], P: Mapping[str, float], idf_top: float = 1.0) -> None:
    """Coverage of the question by the note's best passage (plus title/tags), weighting each question
    word by its rarity (a name that is in every note of a person says little); title, key and alias
    matches."""
    q_terms = query.terms
    title = (e.title if e else "") or ""
    title_terms = _head_terms_of(title)
    # Tags (frontmatter and inline, as indexed) and aliases name the note as much as its title does.
    d0 = next((docs[p] for p in c.pids if p in docs), None)
    questions = _questions_of(e)
    extra = [*((e.meta.get("tags") or []) if e else []), *((d0 or {}).get("tags") or []),
             *((e.meta.get("aliases") or []) if e else []), *questions]
    head_terms = (title_terms | _head_terms_of(" ".join(str(x) for x in extra))) if extra else title_terms
    if q_terms:
        head_w = sum(w for t, w in q_weighted if t in head_terms)
        rest = [(t, w) for t, w in q_weighted if t not in head_terms]
        # The passages BM25 matched hold the note's word overlap; analysing every passage the
        # vectors found too was a third of a 10k recall. With no lexical match, look at all.
        best = 0.0
        best_terms: frozenset[str] = frozenset()
        for p in (c.lex_scores or c.pids):
            d = docs.get(p)
            if d is None:
                continue
            pt = _terms_of(d["text"])
            v = sum(w for t, w in rest if t in pt)
            if v > best:
                best, best_terms = v, pt
                if head_w + best >= q_total:
                    break
        f.coverage = (head_w + best) / q_total
        shared = [w for t, w in q_weighted if t in head_terms or t in best_terms]
        f.specificity = min(1.0, max(shared) / idf_top) if shared else 0.0
        # An alias is another title (`aliases: [shipping]`): "shipping" alone was answered by a note that
        # says "logs ship to ..." rather than by the note named so (docs/benchmarks.md, stop 23).
        aliases = (e.meta.get("aliases") or []) if e else []
        named = (title_terms | _head_terms_of(" ".join(str(a) for a in aliases))) if aliases else title_terms
        f.title_coverage = sum(1 for t in q_terms if t in named) / len(q_terms)
        # A question the writer foresaw: the share of this one's words that one of theirs holds.
        for wq in questions:
            wt = _head_terms_of(wq)
            f.question_match = max(f.question_match, sum(w for t, w in q_weighted if t in wt) / q_total)
    qnorm = query.norm
    low = title.lower()
    f.exact_title = 1.0 if title and (low == qnorm or (len(title) >= P["exact_title_min_chars"] and low in qnorm)) else 0.0
    key = (e.memory_key if e else "") or ""
    f.key_match = 1.0 if key and key.split("/")[-1].replace("-", " ") in qnorm else 0.0
    aliases = [str(a).lower() for a in ((e.meta.get("aliases") or []) if e else [])]
    f.alias_match = 1.0 if any(a and a in qnorm for a in aliases) else 0.0


def _questions_of(e: Entry | None) -> list[str]:
    v = e.meta.get("questions") if e else None
    return [v] if isinstance(v, str) else [str(x) for x in v] if isinstance(v, list) else []


def _note(f: Features, c: Cand, e: Entry | None, query: Query, docs: Mapping[str, dict],
          P: Mapping[str, float]) -> None:
    f.status = e.status if e else ""
    conf = e.meta.get("confidence") if e else None
    try:
        f.confidence = float(conf) if conf is not None else P["conf_default"]
    except (TypeError, ValueError):
        f.confidence = P["conf_default"]
    f.superseded = f.status == "superseded" and not query.history and query.cutoff is None
    if query.window is not None:
        lo, hi = query.window
        d = next((docs[p]["date"] for p in c.pids if p in docs), None)
        # The grace after a window is for notes that report events (a conversation on Monday about
        # Saturday); a typed memory is dated when it was written, so one written today is not "from
        # two days ago" (in a small vault, today's memories outranked the day's conversation).
        grace = 0.0 if e is not None and e.kind == "memory" else P["window_after"] * 86400
        f.in_window = d is not None and lo <= d <= hi + grace
