"""Late interaction: a second look at the best few candidates, word by word.

One e5 cosine compares two averages; MaxSim (ColBERT-style) compares each word of the question with
the nearest word of the passage and averages that, so a paraphrase that names the same things in
other words ("which cloud runs our website?" / "the web app is deployed on Fly.io") is told apart from
a note that merely sounds similar. It uses the pack's own per-token hidden states (the ONNX graph
outputs ``last_hidden_state`` before pooling): no other model.

The passages' token vectors are computed on first use and kept in memory (``_CACHE``, by pack key and
passage text), so a warm process (the server) pays the model once per passage; the question's token
vectors cost one short model run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .candidates import Cand, background_tokens
from .params import PARAMS
from .textcache import TextCache

_CACHE = TextCache(20000, max_bytes=64 << 20)  # passages; ~30 kB each at 40 tokens (float16), 390 kB at 512


def available(embedder: Any) -> bool:
    return embedder is not None and hasattr(embedder, "token_vectors")


def latin_only(text: str) -> bool:
    """Word-level matching needs the question and the note in one script: a Chinese or Japanese
    question about an English note shares no tokens with it (on benchmarks/smallvault a Chinese
    question then abstained), so such questions keep the pooled cosine's judgement."""
    return not any(ch.isalpha() and ord(ch) > 0x024F for ch in text)


def _passage_tokens(embedder: Any, texts: Sequence[str]) -> list[Any]:
    key = getattr(embedder, "pack_key", str(id(embedder)))
    return _CACHE.get(key, texts, lambda todo: embedder.token_vectors(todo, query=False))


def query_tokens(embedder: Any, text: str, qcache: dict[str, Any]) -> Any:
    if "qt" not in qcache:
        qcache["qt"] = embedder.token_vectors([text], query=True)[0]
    return qcache["qt"]


def background_floor(embedder: Any, qt: Any, params: Mapping[str, float] = PARAMS) -> float:
    """Mean MaxSim of the question with its ``background_top`` nearest background texts (the same
    everyday and textbook sentences as the cosine floor): how well *any* text matches it word by word."""
    sims = sorted(maxsims(qt, background_tokens(embedder)), reverse=True)
    n = max(1, int(params["background_top"]))
    return sum(sims[:n]) / n


def judge(ranked: Sequence[Cand], query_text: str, embedder: Any, docs: Mapping[str, dict],
          qcache: dict[str, Any], params: Mapping[str, float] = PARAMS) -> None:
    """Set ``features.late_gap`` on the hits abstention reads (the first ``abstain_top``): the MaxSim
    of the note's best passage minus the background floor. Word-level matching separates a question
    the vault answers from one about something else better than one pooled cosine (AUC and the
    operating point are in docs/benchmarks.md)."""
    top = [c for c in ranked[: int(params["abstain_top"])] if c.features is not None and c.pids]
    if not top or not available(embedder):
        return
    qt = query_tokens(embedder, query_text, qcache)
    if "late_floor" not in qcache:
        qcache["late_floor"] = background_floor(embedder, qt, params)
    texts, owners = [], []
    for c in top:
        best = max((p for p in c.pids if p in docs), key=lambda p: c.pids[p], default=None)
        # The same rule for the note as for the question: an English question shares no tokens with a
        # Chinese note, whose MaxSim then falls below the background and abstained on the one note that
        # answers it (issue 28). Such a note keeps the pooled cosine's judgement (late_gap None).
        if best is not None and latin_only(docs[best]["text"]):
            texts.append(docs[best]["text"])
            owners.append(c)
    for c, sim in zip(owners, maxsims(qt, _passage_tokens(embedder, texts)), strict=True):
        c.features.late_gap = sim - qcache["late_floor"]


def maxsim(query_tokens: Any, passage_tokens: Any) -> float:
    """Mean over the question's words of the best cosine with any word of the passage."""
    if not len(query_tokens) or not len(passage_tokens):
        return 0.0
    sims = query_tokens @ passage_tokens.T.astype("float32")
    return float(sims.max(axis=1).mean())


def maxsims(query_tokens: Any, passages: Sequence[Any]) -> list[float]:
    """:func:`maxsim` of the question with each passage, from one matrix product over all their
    tokens (deep mode scores a hundred notes' passages: one numpy op instead of a Python loop)."""
    import numpy as np

    out = [0.0] * len(passages)
    keep = [i for i, p in enumerate(passages) if len(p)]
    if not len(query_tokens) or not keep:
        return out
    sims = query_tokens @ np.concatenate([passages[i] for i in keep]).astype("float32").T
    starts = np.cumsum([0] + [len(passages[i]) for i in keep[:-1]])
    best = np.ascontiguousarray(np.maximum.reduceat(sims, starts, axis=1).T)  # (passage, question token)
    for i, m in zip(keep, best.mean(axis=1).tolist(), strict=True):
        out[i] = float(m)
    return out


def rerank(ranked: Sequence[Cand], query_text: str, embedder: Any, docs: Mapping[str, dict],
           qcache: dict[str, Any], params: Mapping[str, float] = PARAMS) -> dict[str, float]:
    """Set ``features.li_rank`` / ``features.late`` on the top ``li_top`` candidates (``ranked`` best
    first). A note scores by its best of ``li_passages`` passages. Returns path -> MaxSim."""
    top = [c for c in ranked[: int(params["li_top"])] if c.features is not None]
    if not top or not available(embedder):
        return {}
    qt = query_tokens(embedder, query_text, qcache)
    per: list[tuple[Cand, list[str]]] = []
    texts: list[str] = []
    for c in top:
        pids = [p for p in sorted(c.pids, key=lambda p: -c.pids[p]) if p in docs][: int(params["li_passages"])]
        per.append((c, pids))
        texts.extend(docs[p]["text"] for p in pids)
    sims = iter(maxsims(qt, _passage_tokens(embedder, texts)))
    out: dict[str, float] = {}
    for c, pids in per:
        out[c.path] = max((next(sims) for _p in pids), default=0.0)
    for i, c in enumerate(sorted(top, key=lambda c: -out[c.path])):
        c.features.li_rank = i
        c.features.late = out[c.path]
    return out
