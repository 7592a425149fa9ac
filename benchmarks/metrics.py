"""Retrieval metrics: recall@k (any gold / all gold), reciprocal rank, turn-level evidence hits.

A ranking is a list of document ids, best first; duplicates (several passages of one note) count
once, at their best rank. MRR is computed over whatever the system returned (the runs here ask
every system for 10 notes, so it is MRR@10).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

_ANY_DIALOG_ID = re.compile(r"(?<![\w:])D\d+:\d+(?!\d)")


def unique_in_order(ids: Iterable[str | None]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for d in ids:
        if d is not None and d not in seen:
            seen.add(d)
            out.append(d)
    return out


def reciprocal_rank(ranked: Sequence[str | None], gold: Collection[str]) -> float:
    for i, d in enumerate(unique_in_order(ranked), start=1):
        if d in gold:
            return 1.0 / i
    return 0.0


def session_scores(ranked: Sequence[str | None], gold: Collection[str],
                   ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """any@k: a gold doc in the top k; all@k: every gold doc in the top k; mrr: 1/rank of the first gold."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("a question needs at least one gold document")
    docs = unique_in_order(ranked)
    out: dict[str, float] = {}
    for k in ks:
        top = set(docs[:k])
        out[f"any@{k}"] = 1.0 if top & gold_set else 0.0
        out[f"all@{k}"] = 1.0 if gold_set <= top else 0.0
    out["mrr"] = reciprocal_rank(docs, gold_set)
    return out


@lru_cache(maxsize=65536)
def _dialog_id_re(did: str) -> re.Pattern[str]:
    # "D3:4" must not match inside "D3:40" or "D13:4".
    return re.compile(r"(?<![\w:])" + re.escape(did) + r"(?!\d)")


def text_has_dialog_id(text: str, did: str) -> bool:
    return _dialog_id_re(did).search(text) is not None


def dialog_ids_in(text: str) -> set[str]:
    return set(_ANY_DIALOG_ID.findall(text))


def turn_scores(results: Sequence[tuple[str | None, Sequence[str]]], gold: Mapping[str, str],
                ks: Sequence[int] = (5, 10)) -> dict[str, float]:
    """Turn level: do the passages of the top-k results contain the evidence dialog ids?

    ``results[i]`` is (note id, passage texts returned with result i); ``gold`` maps each evidence
    dialog id to the note that holds it. Dialog ids repeat across conversations ("D3:4" exists in
    every one), so a passage counts only when it comes from that note.
    """
    if not gold:
        raise ValueError("a question needs at least one gold dialog id")
    first_rank: dict[str, int] = {}
    for rank, (doc_id, passages) in enumerate(results, start=1):
        for did, note in gold.items():
            if did not in first_rank and doc_id == note and any(text_has_dialog_id(t, did) for t in passages):
                first_rank[did] = rank
        if len(first_rank) == len(gold):
            break
    out: dict[str, float] = {}
    for k in ks:
        found = [r for r in first_rank.values() if r <= k]
        out[f"turn_any@{k}"] = 1.0 if found else 0.0
        out[f"turn_all@{k}"] = 1.0 if len(found) == len(gold) else 0.0
    return out


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def aggregate(records: Sequence[Mapping[str, Any]], metrics: Sequence[str],
              group_key: str | None = None) -> dict[str, dict[str, float | None]]:
    """Mean of each metric over ``records`` ("pooled"), and per value of ``group_key`` when given.

    Records missing a metric (or holding None) are left out of that metric's mean; a metric no
    record has is None (JSON null).
    """
    groups: dict[str, list[Mapping[str, Any]]] = {"pooled": list(records)}
    if group_key:
        for r in records:
            groups.setdefault(str(r[group_key]), []).append(r)
    out: dict[str, dict[str, float | None]] = {}
    for g, rs in groups.items():
        row: dict[str, float | None] = {"n": len(rs)}
        for m in metrics:
            vals = [float(r[m]) for r in rs if r.get(m) is not None]
            row[m] = round(mean(vals), 4) if vals else None
        out[g] = row
    return out
