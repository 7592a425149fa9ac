"""The abstention policy: when recall says "nothing fits" instead of returning the nearest noise, and
which hits after the first stand on their own evidence. Thresholds live in ``PARAMS`` and are compared
with the values ``scoreDetails`` reports (coverage to 3 places, gap to 4), so a reason can be checked
against the details a reader sees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .features import Features
from .params import PARAMS
from .query import Query

# Notes the team wrote: typed memory and conversations. Everything else is reference material, which
# needs more evidence before the hook injects it and is never what a reply points to.
OWN_KINDS = ("memory", "conversation")


def _coverage(f: Features) -> float:
    return round(f.coverage, 3)


def _gap(f: Features) -> float | None:
    return round(f.gap, 4) if f.gap is not None else None


def placed_by_question(f: Features) -> bool:
    """The second model placed this note by one of its writer's ``questions`` (nearer the asked one than
    its own text is: ``rerankQuestionSim`` = ``rerankSim`` in scoreDetails), not by its text."""
    return f.rr_question_sim is not None and f.rr_sim is not None and f.rr_question_sim >= f.rr_sim


def read(ranked: Sequence[Features], params: Mapping[str, float] = PARAMS) -> list[Features]:
    """The hits whose evidence decides: the first ``abstain_top`` placed by their own text, and any a
    writer's question placed among them (``abstain_by_text``; read too, on their text like every hit).
    The gap reads a note's text alone, because a question is near any other question; so a note lifted
    by its questions, its text far from the asked one, must not push out of the top the note whose text
    answers (aliasvault, 45 notes: "How should I run asynchronous tasks for the new service?" had three
    such notes at -0.129 to -0.056 over the background ahead of *Background jobs* at +0.110, and
    abstained)."""
    n = int(params["abstain_top"])
    if not params["abstain_by_text"]:
        return list(ranked[:n])
    out: list[Features] = []
    own = 0
    for f in ranked:
        if own >= n:
            break
        out.append(f)
        own += not placed_by_question(f)
    return out


def _near_line_clear_e5(f: Features, P: Mapping[str, float]) -> bool:
    """The second model puts this note just under the line (``abstain_rr_near`` to 0: it is no better
    than the background sentences, not worse) while e5 separates it clearly (``abstain_rr_e5``): the
    two models disagree by a hair, and the one that is sure is heard. Off-topic prompts never come
    near: the most e5 separated any off-topic note the second model had near the line is 0.045, on
    smallvault and aliasvault at 45 to 2,045 notes; held answerable questions there sat at 0.081-0.095
    ("Why did we get rid of Celery?", the writer's own note, MiniLM -0.024)."""
    gap = _gap(f)
    return f.rr_gap is not None and gap is not None and round(f.rr_gap, 4) >= P["abstain_rr_near"] and gap >= P["abstain_rr_e5"]


def reason(ranked: Sequence[Features], query: Query, params: Mapping[str, float] = PARAMS) -> str | None:
    """Why nothing fits (None: something does). Abstains only when both signals are weak: lexical
    coverage and semantic separation from unrelated text."""
    P = params
    if not ranked:
        return "no note matches the question"
    top = read(ranked, P)
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
        if any(_near_line_clear_e5(f, P) for f in top):
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



def _words(d: Mapping) -> float:
    """The prompt's words the note holds (rarity-weighted coverage) times how specific the rarest of
    them is in this vault (``specificity``): high only when a word few notes have is there."""
    return float(d.get("coverage") or 0.0) * float(d.get("specificity") or 0.0)


def hook_evidence(hit: Mapping, params: Mapping[str, float] = PARAMS) -> tuple[float, str]:
    """How strongly one hit, on its own, says it answers the prompt, and what that rests on
    (``rerank``: the second model's gap over the background; ``e5``: the first model's gap, plus the
    prompt's words the note holds, weighted by how specific they are in this vault; ``lexical``: those
    words alone, the in-process answer without vectors). Read from ``scoreDetails`` only: the hits may
    come from the server, and a reader can check the gate against the details shown."""
    d = hit.get("scoreDetails") or {}
    words = _words(d)
    rr = d.get("rerankGap")
    gap = d.get("semanticGap")
    if rr is not None:
        # The two models agreeing says more than either: the first model's gap joins the second's.
        return float(rr) + params["hook_w_gap"] * float(gap or 0.0), "rerank"
    if gap is not None:
        if hit.get("kind") == "memory":
            # The floor rises with the index (the best of more notes comes nearer by chance), but typed
            # memory is the same few notes however many documents sit beside it: at +3,000 reference
            # notes the allowance alone took "vipps" and "infra/gke/main.tf" under the bar.
            gap = float(gap) + float(d.get("floorAllowance") or 0.0)
        return float(gap) + params["hook_w_words"] * words, "e5"
    return words, "lexical"


def hook_need(basis: str, kind: str | None, params: Mapping[str, float]) -> float:
    """The evidence a hit needs: reference material (notes that are not typed memory) needs more."""
    base = {"rerank": "hook_rr", "e5": "hook_gap", "lexical": "hook_lex"}[basis]
    return params[base] + (params[base + "_note"] if kind not in OWN_KINDS else 0.0)


def _need(hit: Mapping, basis: str, params: Mapping[str, float], latin: bool) -> float:
    """:func:`hook_need` for this hit. On e5's gap alone (the second model did not read the prompt: a
    path, an error line, bare keywords), a note holding none of the words of a prompt in Latin script
    needs ``hook_gap_wordless`` more: such a prompt is its words, and a note with none of them is only
    near it the way small vaults' notes are near anything ("git push rejected: non-fast-forward" and
    the demo's *Flaky sync test*, e5 gap 0.036). A prompt in another script shares no word with most
    notes whatever it asks, so its gap alone keeps counting."""
    need = hook_need(basis, hit.get("kind"), params)
    if latin and basis == "e5" and not float((hit.get("scoreDetails") or {}).get("coverage") or 0.0):
        need += params["hook_gap_wordless"]
    return need


def _strength(ev: float, need: float, words: float, words_need: float) -> float:
    """How many times its bar a hit reaches, on its evidence or on its words, whichever is more."""
    return round(max(ev / need if need > 0 else 0.0, words / words_need if words_need > 0 else 0.0), 3)


def _standing(hit: Mapping, params: Mapping[str, float], latin: bool) -> float:
    """A hit's evidence for the clear-lead rule of :func:`hook_gate`: its evidence less
    ``hook_clear_bar`` of the bar it must reach (0: the evidence alone)."""
    ev, basis = hook_evidence(hit, params)
    return ev - params["hook_clear_bar"] * _need(hit, basis, params, latin)


def hook_gate(hits: Sequence[dict], referents: Sequence[dict], *, short: bool, latin: bool = False,
              params: Mapping[str, float] = PARAMS) -> tuple[list[dict], str | None]:
    """The notes the prompt hook injects, each on its own evidence (:func:`hook_evidence`): at least
    what its kind needs, and within ``hook_rel`` of the strongest hit's evidence, at most
    ``hook_max_items``. ``referents``: hits of the prompt + previous reply search whose topic is in
    that text (``search.prompt``); a short prompt is about them, so the first of them leads (it has
    only lexical evidence, and its topic words in the conversation are that evidence). A replaced
    version is never injected: the hook speaks about now. ``latin``: the prompt is in Latin script
    (:func:`_need`). Returns (hits, why none when empty);
    each judged hit's ``scoreDetails.hookGate`` says what it was judged on."""
    P = params
    judged: list[tuple[float, dict]] = []
    why: str | None = None
    for h in hits:
        d = h.setdefault("scoreDetails", {})
        if h.get("status") == "superseded" or h.get("historical"):
            d["hookGate"] = {"kept": False, "why": "a replaced version"}
            continue
        ev, basis = hook_evidence(h, P)
        need = _need(h, basis, P, latin)
        # The vault's own rare words, most of them in the note, answer whatever the models say: neither
        # knows "zorbulator", and the second model reads an unknown word as noise.
        words = _words(d)
        words_need = P["hook_words"] + (P["hook_words_note"] if h.get("kind") not in OWN_KINDS else 0.0)
        ok = ev >= need or words >= words_need
        d["hookGate"] = {"evidence": round(ev, 4), "basis": basis, "need": round(need, 4), "words": round(words, 4),
                         "wordsNeed": round(words_need, 4), "strength": _strength(ev, need, words, words_need),
                         "kept": ok}
        if ok:
            judged.append((ev, h))
        elif why is None:
            why = f"best match's evidence ({basis}) {ev:+.3f} is under the {need:.3f} the hook needs"
    # A lead that stands clear of every other hit passes on less evidence: one note answers and the
    # rest of the list is noise around it ("which node dependency tool should I use?" over two
    # notes, pnpm's at a second-model gap of 0.26; a generic coding prompt's best is among equals).
    # Each hit's standing is its evidence less ``hook_clear_bar`` of its kind's bar: a reference page
    # the second model rates near a typed memory still needs far more than the memory does, so it is
    # no rival (at +3,000 reference notes, "FlagBoundary" 0.23 beside *Feature flags* 0.25).
    evs = sorted(((_standing(h, P, latin), i) for i, h in enumerate(hits)
                  if not (h.get("status") == "superseded" or h.get("historical"))), reverse=True)
    if evs and not any(h is hits[evs[0][1]] for _ev, h in judged):
        top, i = evs[0]
        h = hits[i]
        top_ev, basis = hook_evidence(h, P)
        need = _need(h, basis, P, latin)
        # A lone hit is clear by its evidence: its rival is a hit of its own kind with none.
        clear = top - (evs[1][0] if len(evs) > 1 else -P["hook_clear_bar"] * need)
        low = need - P["hook_clear_less"]
        if basis != "lexical" and clear >= P["hook_clear"] and top_ev >= low:
            h["scoreDetails"]["hookGate"].update(kept=True, clear=round(clear, 4))
            judged.append((top_ev, h))
            judged.sort(key=lambda x: next(j for j, y in enumerate(hits) if y is x[1]))  # recall's order
            why = None
    # A note after the best must be nearly as strong (times its own bar, so a second model's gap and e5's
    # compare): one answer and what sits well under it are the answer and noise. Not on words alone (the
    # lexical answer before the server is up): there one more shared word is no stronger answer, and a
    # note ahead by a common word ("same") pushed out three that named the prompt's topic.
    gates = [h["scoreDetails"]["hookGate"] for _ev, h in judged]
    lead = max((g["strength"] for g in gates if g["basis"] != "lexical"), default=0.0)
    out: list[dict] = []
    for g, (_ev, h) in zip(gates, judged, strict=True):
        if g["basis"] != "lexical" and g["strength"] < P["hook_rel"] * lead:
            h["scoreDetails"]["hookGate"].update(kept=False, why=f"under {P['hook_rel']:.2f} of the best's strength")
            continue
        out.append(h)
    if P["hook_by_evidence"]:
        out.sort(key=lambda h: -h["scoreDetails"]["hookGate"]["evidence"])
    have = {h["path"] for h in out}
    refs: list[dict] = []
    for h in referents:
        if len(refs) >= P["hook_referents"]:
            break
        if h.get("status") == "superseded" or h.get("historical"):
            continue
        d = h.setdefault("scoreDetails", {})
        d["hookGate"] = {"kept": True, "basis": "referent", **({"agree": d["referentAgree"]} if "referentAgree" in d else {})}
        refs.append(h)
    for h in refs:
        if h["path"] in have:
            out.remove(next(x for x in out if x["path"] == h["path"]))
        if short and P["hook_referent_first"]:
            out.insert(0, h)
        else:
            out.append(h)
        have.add(h["path"])
    out = out[: int(P["hook_max_items"])]
    return out, None if out else why
