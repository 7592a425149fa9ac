"""Candidate generation: passages from BM25 (passage and whole-note units) and the vectors, grouped
per note, plus the notes dated inside a window the question names. No ranking happens here."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import StateDamaged
from ..index.predicates import And, In, Pred, Range
from .params import PARAMS
from .query import Query

CANDIDATES = 120  # passages each ranking contributes before fusion (recall's ``pool`` default)

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
_background_cache: dict[Any, Any] = {}  # by pack key (or embedder identity)


def background_vectors(embedder: Any) -> Any:
    key = getattr(embedder, "pack_key", id(embedder))
    if key not in _background_cache:
        _background_cache[key] = embedder.embed_passages(list(BACKGROUND))
    return _background_cache[key]


@dataclass
class Cand:
    """One note's raw evidence: its best scores and the passages each source found."""

    path: str
    lex: float = 0.0  # best passage BM25
    sem: float = -1.0  # best passage cosine (-1: the vectors did not find it)
    pids: dict[str, float] = field(default_factory=dict)  # passage -> rank-fused passage score
    lex_scores: dict[str, float] = field(default_factory=dict)
    sem_scores: dict[str, float] = field(default_factory=dict)
    lex_doc: float = 0.0  # BM25 of the whole note
    win_rank: int | None = None  # rank among the notes dated inside the question's time window
    features: Any = None  # features.Features, once extracted
    details: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0


def gather(view: Any, query: Query, where: Pred, *, semantic: bool, qcache: dict[str, Any] | None = None,
           pool: int = CANDIDATES, params: dict[str, float] = PARAMS) -> tuple[dict[str, Cand], dict[str, Any]]:
    """The candidates and what the ranking needs about the whole set (``info``: term weights,
    similarity statistics, the semantic floor, timings)."""
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    lex_hits = view.lexical.search(query.lexical, where=And((where, In("unit", ("passage", "whole")))), limit=pool)
    note_hits = view.lexical.search(query.lexical, where=And((where, In("unit", ("note", "whole")))), limit=pool)
    info["term_weights"] = view.lexical.term_weights(query.words)
    info["lexicalMs"] = round((time.perf_counter() - t0) * 1000, 2)
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
            qc["qv"] = view.embedder.embed_queries([query.text])[0]
            bg = sorted((background_vectors(view.embedder) @ qc["qv"]).tolist(), reverse=True)
            n = int(params["background_top"])
            qc["background_top3"] = sum(bg[:n]) / n
        try:
            sem_hits = view.vectors.search(qc["qv"], where=where, limit=pool)
        except StateDamaged as e:
            # The vectors were moved aside (the next catch-up rebuilds them): answer lexically.
            view.vectors = None
            view.warnings.append(f"{e.message}; answering lexically until it is rebuilt")
        info["background_top3"] = qc["background_top3"]
        info["semanticMs"] = round((time.perf_counter() - t0) * 1000, 2)
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
    k = params["passage_rrf_k"]
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
                s += 1.0 / (k + lex_rank_p[pid])
            if pid in sem_rank_p:
                s += 1.0 / (k + sem_rank_p[pid])
            c.pids[pid] = s
    info["sim_stats"] = _stats(sims)
    info["lex_max"] = lex_hits[0].score if lex_hits else 0.0
    return cands, info


def add_window(view: Any, cands: dict[str, Cand], where: Pred, window: tuple[int, int],
               params: dict[str, float] = PARAMS) -> None:
    """Notes dated inside a window the question names are candidates even when they share no word
    with it: "what did we talk about last Saturday" asks for that day's conversations. Only notes
    dated strictly inside count here (the after-window grace only boosts notes found otherwise)."""
    rng = And((where, In("unit", ("passage", "whole")), Range("date", lo=window[0], hi=window[1] - 1)))
    rank: dict[str, int] = {}
    for h in view.lexical.matching(rng, limit=int(params["pool_window"])):
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
