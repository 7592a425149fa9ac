"""Candidate generation: passages from BM25 (passage and whole-note units) and the vectors, grouped
per note, plus the notes dated inside a window the question names. No ranking happens here."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import StateDamaged
from ..index.predicates import And, In, Pred, Range
from .params import PARAMS
from .query import Query

if TYPE_CHECKING:
    from ..index.lexical import LexicalIndex
    from ..index.vectors import VectorIndex


class Searched(Protocol):
    """What gathering candidates reads of a view: a :class:`.recall.View`, named by its parts since
    recall imports this module. ``embedder``: the pack's model or a unit test's stand-in."""

    lexical: LexicalIndex
    vectors: VectorIndex | None
    embedder: Any
    warnings: list[str]


CANDIDATES = 120  # passages each ranking contributes before fusion (recall's ``pool`` default)

# Reference passages about what a user's notes are *not* about: everyday life, general knowledge
# (history, geography, science, arts, sport, cooking, language, maths) and textbook programming. A match
# must beat the question's similarity to these by a margin before semantic evidence alone counts: e5
# cosines are compressed (0.75-0.92), so a fixed threshold would be meaningless, but "closer to my notes
# than to an encyclopedia" is measurable. No team-specific sentences here: a background that sounds like
# a developer's vault raised the floor for exactly the questions that vault answers (measured on
# benchmarks/smallvault.py: the gap's AUC, answerable vs off-topic, was 0.79-0.91 with the old
# 24 sentences, half of them about a team's practices, and 0.96-0.99 with these).
BACKGROUND = (
    "I went to the beach with my family last summer.", "She adopted a dog from the shelter.",
    "We talked about our favourite books.", "He is training for a marathon.",
    "The museum had a new painting exhibition.", "They celebrated a birthday at a restaurant.",
    "Cooking pasta with fresh tomatoes.", "Learning to play the guitar takes practice.",
    "The French Revolution began in 1789 and ended the absolute monarchy.",
    "The Roman Empire split into eastern and western halves in the fourth century.",
    "World War II ended in 1945 after the surrender of Germany and Japan.",
    "The Great Wall of China was built over many centuries to defend against invasions.",
    "The Cold War was a long rivalry between the United States and the Soviet Union.",
    "Paris is the capital of France and stands on the river Seine.",
    "The Amazon is the largest rainforest on Earth and spans several South American countries.",
    "Mount Kilimanjaro is the highest mountain in Africa.", "The Pacific is the largest and deepest ocean.",
    "Canada has ten provinces and three territories.",
    "Cells divide by mitosis, producing two identical daughter cells.",
    "DNA carries the genetic instructions of living organisms.", "The heart pumps blood through arteries and veins.",
    "Gravity keeps the planets in orbit around the Sun.", "Water is made of two hydrogen atoms and one oxygen atom.",
    "Light travels faster than sound.", "The Moon's phases come from the changing angle of sunlight.",
    "Mars is called the red planet because of iron oxide on its surface.",
    "Earthquakes happen when tectonic plates shift along a fault.",
    "Plants need sunlight, water and carbon dioxide to grow.",
    "Shakespeare wrote plays such as Macbeth and Romeo and Juliet.", "Beethoven composed nine symphonies.",
    "Van Gogh painted The Starry Night.", "The novel Pride and Prejudice was written by Jane Austen.",
    "The Olympic Games are held every four years.", "A marathon is a little over forty-two kilometres long.",
    "Tennis players score points as fifteen, thirty and forty.",
    "Basketball was invented in the United States in 1891.",
    "Knead the dough for ten minutes and let it rise for an hour.",
    "Roast the vegetables with olive oil, salt and pepper.", "Fresh herbs should be added at the end of cooking.",
    "Spanish and Portuguese are Romance languages.", "The word 'bonjour' means hello in French.",
    "The Pythagorean theorem relates the sides of a right triangle.", "A prime number has exactly two divisors.",
    "The integral of a function gives the area under its curve.", "Probability measures how likely an event is.",
    "A binary search halves the search range at every step.", "Merge sort runs in O(n log n) time.",
    "A stack is last in, first out; a queue is first in, first out.", "Recursion is when a function calls itself.",
    "Object-oriented programming groups data and behaviour into classes.",
    "In Python, dictionaries map keys to values.",
    "JavaScript promises represent a value that may be available later.",
    "A pointer stores the memory address of another variable.",
    "HTTP is a request-response protocol used by the web.",
    "A relational database stores data in tables with rows and columns.",
    "Garbage collection frees memory that is no longer referenced.",
    "Compilers translate source code into machine code.",
    "Big O notation describes how an algorithm's cost grows with input size.",
    "Dogs were domesticated from wolves thousands of years ago.", "Bees pollinate flowers while collecting nectar.",
    "The human body has many bones and muscles.", "Sleep helps the brain consolidate memories.",
    "Regular exercise improves heart health.", "Inflation is a general rise in prices over time.",
    "A volcano erupts when magma reaches the surface.", "Rainbows form when sunlight is refracted in raindrops.",
    "Chess is played on a board of sixty-four squares.", "A sonnet is a poem of fourteen lines.",
    "A linked list stores each element with a pointer to the next one.",
    "A hash table maps keys to buckets with a hash function.",
    "Regular expressions describe patterns of characters in text.",
    "CSS flexbox and grid lay out elements on a web page.",
    "A mutex lets only one thread into a critical section at a time.",
    "Functional languages treat functions as first-class values.",
    "Design principles such as SOLID guide object-oriented code.", "A tuple is an immutable sequence in Python.",
    "Sorting algorithms include quicksort, heapsort and insertion sort.",
    "Distributed systems trade off consistency and availability.",
    "The shell pipes the output of one command into the next.", "Unit conversions multiply by a fixed factor.",
)
_background_cache: dict[Any, Any] = {}  # by pack key (or embedder identity)
_background_tokens: dict[Any, list[Any]] = {}


def background_vectors(embedder: Any) -> Any:
    """The background's vectors: once per process (the server does it before it is ready, not in the
    first prompt's request)."""
    key = getattr(embedder, "pack_key", id(embedder))
    if key not in _background_cache:
        import numpy as np

        from ..embedding.fixed import cached

        rows = cached(_pack(embedder), "background", BACKGROUND, lambda: list(embedder.embed_passages(list(BACKGROUND))))
        _background_cache[key] = np.stack(rows)
    return _background_cache[key]


def background_tokens(embedder: Any) -> list[Any]:
    """The background's token vectors, for the late-interaction check: on first use (1.2-1.4 s CPU), so
    a one-shot in-process recall pays it only when that check runs; the server computes them up front."""
    key = getattr(embedder, "pack_key", id(embedder))
    if key not in _background_tokens:
        from ..embedding.fixed import cached

        _background_tokens[key] = cached(_pack(embedder), "background-tokens", BACKGROUND, lambda: [
            t.astype("float16") for t in embedder.token_vectors(list(BACKGROUND), query=False)])
    return _background_tokens[key]


def _pack(embedder: Any) -> str | None:
    """The pack an embedder's vectors belong to (None: a test's stand-in, whose vectors are not kept)."""
    key = getattr(embedder, "pack_key", None)
    return key if isinstance(key, str) else None


def size_allowance(view: Searched, params: dict[str, float] = PARAMS) -> float:
    """How much closer than the background a note may come by chance, given the vault's size: the
    best of more notes is nearer to any question (an off-topic question's best cosine rose by ~0.02 from
    20 to 2,000 notes on benchmarks/smallvault.py). Part of the semantic floor, so every threshold
    compared with ``semanticGap`` holds at every vault size."""
    ref = params["floor_ref_docs"]
    n = view.lexical.doc_count()
    return params["floor_per_decade"] * math.log10(n / ref) if n > ref else 0.0


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
    name_sem: float = -1.0  # best cosine of the writer's questions/aliases (`~q` rows; -1: none found)
    win_rank: int | None = None  # rank among the notes dated inside the question's time window
    features: Any = None  # features.Features, once extracted
    details: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0


def gather(view: Searched, query: Query, where: Pred, *, semantic: bool, qcache: dict[str, Any] | None = None,
           pool: int = CANDIDATES, params: dict[str, float] = PARAMS) -> tuple[dict[str, Cand], dict[str, Any]]:
    """The candidates and what the ranking needs about the whole set (``info``: term weights,
    similarity statistics, the semantic floor, timings)."""
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    # The passages' stored fields come with them (fetched to name each hit anyway): the ranking reads
    # them, and looking them up again by id cost a 10k recall 5 ms (``info["docs"]``).
    lex_hits = view.lexical.search(query.lexical, where=And((where, In("unit", ("passage", "whole")))), limit=pool,
                                   fetch=True)
    note_hits = view.lexical.search(query.lexical, where=And((where, In("unit", ("note", "whole")))), limit=pool)
    info["term_weights"] = view.lexical.term_weights(query.words)
    info["n_docs"] = view.lexical.doc_count()
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
            if "qv_ahead" in qc:  # started by recall.search while the BM25 searches above ran
                qc["qv"], qc["qt"] = qc.pop("qv_ahead").result()
            elif hasattr(view.embedder, "embed_query_tokens"):
                # The token vectors come out of the same model run: late interaction reads them.
                qc["qv"], qc["qt"] = view.embedder.embed_query_tokens(query.text)
            else:
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
        info["floor_allowance"] = size_allowance(view, params)
        info["background_top3"] = qc["background_top3"] + info["floor_allowance"]
        info["semanticMs"] = round((time.perf_counter() - t0) * 1000, 2)
    info["semantic"] = bool(sem_hits) or (semantic and view.vectors is not None and view.embedder is not None)
    sims = [h.similarity for h in sem_hits]
    # A conversation window (`<passage>~w<n>`) and a writer's question (`~q<n>`) score for the passage
    # they come from.
    sem_pairs = [(h.passage_id.split("~", 1)[0], h) for h in sem_hits]
    for pid, vh in sem_pairs:
        c = cands.setdefault(vh.note_path, Cand(vh.note_path))
        if "~q" in vh.passage_id and vh.similarity > c.name_sem:
            c.name_sem = vh.similarity
        if vh.similarity > c.sem:
            c.sem = vh.similarity
        c.sem_scores[pid] = max(vh.similarity, c.sem_scores.get(pid, -1.0))
    # Passage-level fused score (for picking the best passage to show): rank-based.
    k = params["passage_rrf_k"]
    lex_rank_p = {h.passage_id: i for i, h in enumerate(lex_hits)}
    sem_rank_p: dict[str, int] = {}
    for i, (pid, _h) in enumerate(sem_pairs):
        sem_rank_p.setdefault(pid, i)
    for pid, vh in sem_pairs:
        cands[vh.note_path].pids.setdefault(pid, 0.0)
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
    info["docs"] = {h.passage_id: h.doc for h in lex_hits if h.doc is not None}
    return cands, info


def add_window(view: Searched, cands: dict[str, Cand], where: Pred, window: tuple[int, int],
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
    return {"max": xs[0], "mean": mean, "sd": sd, "median": xs[len(xs) // 2], "min": xs[-1]}
