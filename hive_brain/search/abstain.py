"""The abstention policy: when recall says "nothing fits" instead of returning the nearest noise, and
which hits after the first stand on their own evidence. Thresholds live in ``PARAMS`` and are compared
with the values ``scoreDetails`` reports (coverage to 3 places, gap to 4), so a reason can be checked
against the details a reader sees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .features import Features
from .params import PARAMS
from .query import Query


def _coverage(f: Features) -> float:
    return round(f.coverage, 3)


def _gap(f: Features) -> float | None:
    return round(f.gap, 4) if f.gap is not None else None


def reason(ranked: Sequence[Features], query: Query, params: Mapping[str, float] = PARAMS) -> str | None:
    """Why nothing fits (None: something does). Abstains only when both signals are weak: lexical
    coverage and semantic separation from unrelated text."""
    P = params
    if not ranked:
        return "no note matches the question"
    top = ranked[: int(P["abstain_top"])]
    if query.time_only(P) and any(f.win_rank is not None for f in top):
        return None  # the question asks about a time, and notes from that time are there
    cov = max(_coverage(f) for f in top)
    gaps = [g for f in top if (g := _gap(f)) is not None]
    gap = max(gaps) if gaps else None
    rrs = [round(f.rr_gap, 4) for f in top if f.rr_gap is not None]
    if rrs:
        # The second model read the question (search/rerank.py): how much nearer its best hits come than
        # the background sentences decides (AUC 0.99-1.00, answerable vs off-topic, at 20 to 2,000 notes
        # on benchmarks/smallvault.py; the e5 gap and MaxSim rules below were 0.75-0.85 at 500+ notes).
        # The question's own words, when the note holds most of them, still answer.
        if max(rrs) >= P["abstain_rr_gap"] or (gap is not None and cov >= P["abstain_cov"] and gap >= P["abstain_cov_gap"]):
            return None
        return (f"best match covers {cov:.0%} of the question's words and comes only {max(rrs):+.3f} nearer to it "
                "than unrelated text")
    if gap is None:  # lexical search only (no model, or no vector found anything)
        if cov >= P["abstain_cov_lexical"]:
            return None
    elif cov >= P["abstain_cov"] and gap >= P["abstain_cov_gap"]:
        return None
    lates = [round(f.late_gap, 4) for f in top if f.late_gap is not None]
    late = max(lates) if lates else None
    if late is not None and late >= P["abstain_late_gap"]:
        return None
    # Word-level evidence, when there, decides; a clear cosine gap (`abstain_late_cos`) still answers.
    strong = gap is not None and gap >= (P["abstain_gap"] if late is None else P["abstain_late_cos"])
    if gap is not None and (strong or (cov >= P["abstain_cov_partial"] and gap >= P["abstain_gap_partial"])):
        return None
    if not query.terms and gap is None:
        return "the question has no searchable words"
    if late is not None:
        return f"best match covers {cov:.0%} of the question's words and matches them only {late:+.3f} better than unrelated text"
    return f"best match covers {cov:.0%} of the question's words" + (
        f" and is only {gap:+.3f} above unrelated text semantically" if gap is not None else " (lexical search only)")


def fits(f: Features, query: Query, params: Mapping[str, float] = PARAMS) -> bool:
    """A hit after the first must stand on its own evidence, not just be the nearest noise."""
    if f.win_rank is not None and query.time_only(params):
        return True
    gap = _gap(f)
    return _coverage(f) >= params["fit_cov"] or (gap is not None and gap >= params["fit_gap"])


def memory_is_weak(typed: Sequence[Features], query: Query, params: Mapping[str, float] = PARAMS) -> bool:
    """Tiered recall: typed memory alone does not answer, so the whole vault's ranking is used."""
    if typed and query.time_only(params) and typed[0].win_rank is None:
        # "What did we work on last Saturday": a memory matching "work" from another day does not
        # answer; that day's conversations (outside typed memory) do.
        return True
    return not typed or reason(typed, query, params) is not None or _coverage(typed[0]) < params["tier_cov"]
