"""The prompt hook's answer: a context pack for one prompt, from the prompt and what it refers to.

Both the server's ``prompt`` op (``daemon/sockets.py``) and the hook's in-process fallback
(``agents/hooks.py``) end in :func:`prompt_pack`, so the two answer alike. Only the standard library is
imported at load time: the hook process imports this module; the ranking, the stemmer, the pack
builder, the transcript reader and the usage log load where they are used.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook's process imports this module
if TYPE_CHECKING:
    from typing import Any

CONTEXT_CHARS = 1500  # words of the previous assistant reply that join the query
PROMPT_CHARS = 4000  # a pasted log after the question adds nothing but noise
RESULT_LIMIT = 6
HOOK_POOL = 60  # candidates per ranking on the prompt path (recall's default is 120): see recall.search
HOOK_DETAIL = "overview"  # passages, never whole notes: recall's default (full) would read every hit's note
LONG_PROMPT_WORDS = 8
USAGE_LOCK_WAIT_S = 0.05  # the longest the prompt hook waits to log what it injected
CONVERSATIONAL_MAX_WORDS = 6
# Words a developer says to the agent rather than about the work: acknowledgements, nudges, retries,
# stops, approvals, reactions, greetings (English, and the commonest in a few other languages). A short
# prompt made only of them ("ok go on", "try again", "wait, stop") asks the vault nothing: searched, each
# word found the one note that happened to hold it ("ok" in a hotfix note, "go" in the Go notes).
# Written from general usage, not from a benchmark's prompts (docs/benchmarks.md, the lexical gate).
CONVERSATIONAL_TEXT = """
    ok okay okey okie dokie k kk alright alrite right sure fine good great nice cool awesome perfect
    excellent amazing brilliant wonderful neat sweet lovely super splendid fair enough thanks thank thx ty
    tysm cheers appreciated appreciate much lot best rock legend lifesaver job happy yes yeah yep yup ya
    yea y aye indeed absolutely definitely certainly correct exactly agreed agree true sounds works thing
    approved approve lgtm sgtm ack noted understood roger got gotcha see makes sense mean meant
    no nope nah n not never wrong bad worse meh hmm hm hmmm huh eh oh ah aha wow whoa oops oof uh um ugh
    yikes damn bruh lol lmao haha heh weird strange odd interesting unexpected surprising fast quick slow
    go going ahead on keep continue continuing cont proceed procede carry next step more further onward
    forward resume finish rest others other else same too here there why how come what then
    try retry again redo rerun another shot attempt once one run do it that this those these them
    please pls plz wait hold off hang stop halt pause cancel abort quit mind nevermind sec second moment
    minute brb yet undo revert back scratch asked put was
    shorter short brief concise verbose less longer detail details elaborate explain simpler simply
    summarize summarise summary tldr tl dr bullet points table format sentence output full code just
    show apologizing apologize sorry u ur give need use say like anything apply
    hi hello hey hiya yo morning afternoon evening night bye goodbye later cya ciao welcome claude codex
    gemini cursor copilot buddy mate dude
    done finished ready well now still really very so also actually maybe perhaps today
    ja nein danke gut weiter bitte genau stimmt nochmal mal oui non merci beaucoup bien vas pourquoi
    attends vale gracias bueno sigue claro perfecto otra vez sí adelante obrigado sim não nei takk bra
    fortsett greit flott angre dank je wel 好 好的 谢谢 继续 对 行 可以 不 是 你 辛苦 了 为什么 ありがとう
"""


def without_hook_context(prompt: str) -> str:
    """The prompt the user typed: Gemini CLI hands BeforeAgent the prompt with what SessionStart hooks
    added (our core memory) in front, as ``<hook_context>...</hook_context>``; searching that would
    find the core memory again instead of what the prompt asks."""
    if "<hook_context>" not in prompt:
        return prompt
    import re

    return re.sub(r"<hook_context>[\s\S]*?(?:</hook_context>|\Z)", "", prompt).strip()


def mode_header(mode: str) -> str:
    if mode == "hybrid":
        return "[hive-brain: hybrid recall (BM25 + vectors) from the running server]"
    if mode == "scan":
        return "[hive-brain: no usable index: a plain scan of the notes for the prompt's words; it is being rebuilt]"
    why = "server not running" if mode == "lexical" else "server answered without vectors"
    return f"[hive-brain: lexical recall only ({why}); semantic matches may be missing]"


def transcript_context(transcript_path: str | None) -> str:
    """The end of the last assistant reply in an agent's transcript ("" without one)."""
    if not transcript_path:
        return ""
    from ..memory.conversations import last_assistant_text

    return last_assistant_text(transcript_path, max_chars=CONTEXT_CHARS)


def prompt_pack(recall: Any, prompt: str, context: str = "", *, budget: int, state: Any, agent: str | None,
                deadline: float | None = None, full_text: Any = None, local: bool = False,
                hybrid: bool | None = None) -> dict:
    """The prompt hook's answer from ``recall`` (in-process, or the server's own search): the
    :func:`contextual_answer` pack under its mode header, cut to ``budget``, its memories logged as
    ``retrieved`` usage. The server's ``prompt`` op and the in-process fallback both end here.

    ``local``: the lexical in-process view (whole conversations can be read); else the server's hybrid
    ranking (``lexical-server`` when it answered without vectors). ``hybrid``: whether the server's
    view searches by meaning (the server knows; None: read it off the first search, which a prompt
    with no searchable words never makes: the search of prompt + reply is lexical by design)."""
    pack = contextual_answer(recall, without_hook_context(prompt), context, budget=budget, full_text=full_text)
    if hybrid is None:
        hybrid = bool((pack.get("recall") or {}).get("semantic"))
    mode = "lexical" if local else "hybrid" if hybrid else "lexical-server"
    if (pack.get("recall") or {}).get("mode") == "scan":
        mode = "scan"  # the index could not be read: the notes were scanned (search/scan.py)
    pack["mode"] = mode
    if not pack.get("abstained") and pack.get("context"):
        from .answer import fit

        pack["context"] = fit(mode_header(mode) + "\n" + pack["context"], budget)  # keeps the frame closed
        pack["chars"] = len(pack["context"])
        _log_usage(state, pack, agent, time.monotonic() + 1.0 if deadline is None else deadline)
    return pack


def _log_usage(state: Any, pack: dict, agent: str | None, deadline: float) -> None:
    """The memories injected, as ``retrieved`` usage: one line appended to the per-device usage log,
    waiting for its lock at most USAGE_LOCK_WAIT_S and never past the deadline (a busy log loses this
    signal, never the answer). Written where the pack is made: only there is it known which hits were kept."""
    wait = min(USAGE_LOCK_WAIT_S, deadline - time.monotonic() - 0.01)
    if wait <= 0:
        return
    from ..memory.operations import log_retrieved

    log_retrieved(state, pack.get("items") or [], agent=agent, timeout=wait)


def _topic_present(hit: dict, q_terms: set[str]) -> bool:
    """A hit found through the conversation context must have its topic (title words) in that context."""
    from ..index.textproc import content_words

    title_terms = set(content_words(str(hit.get("title") or "")))
    if not title_terms:
        return False
    matched = len(title_terms & q_terms)
    return matched >= min(2, len(title_terms)) and matched / len(title_terms) >= 0.5


def _referents(r2_hits: list[dict], q_terms: set[str], prompt_hits: list[dict], P: Any) -> list[dict]:
    """The notes the previous reply points to: among the best hits of the prompt + reply search, those
    whose topic (title words) is in that text. When none is, a note the prompt's own search found too,
    with at least ``hook_referent_agree`` of the evidence the gate asks of it there, is read two ways
    at once: "do the same for the android code" after a reply about reformatting Go files (no note's
    title in it) asks about formatting Kotlin, which the prompt alone and the prompt + reply both find.
    The agreement is in the referent's ``scoreDetails.referentAgree``."""
    from .abstain import OWN_KINDS, hook_evidence, hook_need

    # The window holds only what can be a referent. A reference page's one-word title ("merge", "return",
    # "Real") is in any reply about code: at +3,000 reference notes such a page took a place here, was
    # named, and shut out both the memory the reply points to and the agreement test.
    top = [h for h in r2_hits if h.get("kind") in OWN_KINDS
           or (P["hook_referent_notes"] and h.get("kind") != "core")][: int(P["hook_referent_top"])]
    named = [h for h in top if _topic_present(h, q_terms)]
    if named:
        return named
    found = {h["path"]: h for h in prompt_hits}
    out = []
    for h in top:
        if (own := found.get(h["path"])) is None:
            continue
        ev, basis = hook_evidence(own, P)
        need = P["hook_referent_agree"] * hook_need(basis, own.get("kind"), P)
        if ev >= need:
            h.setdefault("scoreDetails", {})["referentAgree"] = {"evidence": round(ev, 4), "basis": basis,
                                                                 "need": round(need, 4)}
            out.append(h)
    return out


def _with_reply(recall: Any, prompt: str, context: str, hits: list[dict], limit: int, P: Any) -> list[dict]:
    """Hits of a hybrid search of a short prompt with the end of the previous reply
    (``hook_context_chars``), not already among ``hits``: "get it out to people to try" after "the
    Android build is ready" asks about beta builds, which neither text names alone. They pass the gate
    on their own evidence like any hit; the end of the reply only (not its 1,500 characters) keeps the
    models' work on the hook's path small."""
    n = int(P["hook_context_chars"])
    if n <= 0:
        return []
    tail = context[-n:]
    if len(context) > n and " " in tail:
        tail = tail.split(" ", 1)[1]  # from a word's start
    r3 = recall(prompt + "\n" + tail, limit=limit, abstain=False, pool=HOOK_POOL, detail=HOOK_DETAIL)
    have = {h["path"] for h in hits}
    return [h for h in r3["hits"] if h["path"] not in have and h.get("kind") != "core"]


def conversational(prompt: str, words: list[str] | None = None) -> bool:
    """A short prompt every word of which is addressed to the agent (``CONVERSATIONAL_TEXT``)."""
    from ..index.textproc import content_words

    words = content_words(prompt) if words is None else words
    return len(prompt.split()) <= CONVERSATIONAL_MAX_WORDS and set(words) <= _conversational_terms()


def _conversational_terms() -> frozenset[str]:
    global _CONVERSATIONAL
    if _CONVERSATIONAL is None:
        from ..index.textproc import content_words

        _CONVERSATIONAL = frozenset(content_words(CONVERSATIONAL_TEXT))
    return _CONVERSATIONAL


_CONVERSATIONAL: frozenset[str] | None = None


def contextual_answer(
    recall: Any,
    prompt: str,
    context: str = "",
    *,
    budget: int,
    full_text: Any = None,
    limit: int = RESULT_LIMIT,
    params: Any = None,
) -> dict:
    """Answer a prompt, using the previous assistant reply to resolve what it refers to ("do all 3").

    ``recall(query, **opts)`` returns a ``recall.search`` result (in-process or from the server); it
    takes ``semantic=False`` (the second search).
    The prompt alone is asked first (its words weigh most); the prompt + reply search runs whenever
    there is a reply (a full first list must not hide what the reply points to), and its hits are
    referents when their topic appears in prompt + context. A plain coverage gate over the joined text
    would abstain on everything, since no note covers a whole reply. Then every note earns its place
    on its own evidence (``abstain.hook_gate``): the hook may inject one note, or none.
    """
    from ..index.textproc import content_words
    from . import rerank
    from .abstain import hook_gate
    from .answer import build
    from .params import PARAMS

    P = PARAMS if params is None else params
    r1 = None
    hits: list[dict] = []
    words = content_words(prompt)
    # "do all 3" alone would match any note with a 3 in it: numbers only count next to words. A prompt
    # that only talks to the agent is not searched (what the reply points to still is, below).
    if any(not t.isdigit() for t in words) and not (P["hook_conversational"] and conversational(prompt, words)):
        r1 = recall(prompt, limit=limit, pool=HOOK_POOL, detail=HOOK_DETAIL)
        if not r1.get("abstained"):
            # Core Memory is injected at session start; repeating it on every prompt wastes the budget.
            hits = [h for h in r1["hits"] if h.get("kind") != "core"]
    base = r1
    referents: list[dict] = []
    extra: list[dict] = []
    # A prompt that says what it wants in many words refers to nothing earlier; skip the second search.
    if context.strip() and (len(words) < LONG_PROMPT_WORDS or not hits):
        q2 = prompt + "\n" + context
        # Lexical only: a hit of this search joins only when its title words are in prompt + reply
        # (_topic_present), which BM25 finds by itself; the model runs over a 1,500-character text
        # (e5 and the second model's cold passages) tripled the hook's time with a transcript
        # (benchmarks/hook_latency.py) for hits the filter then mostly dropped.
        r2 = recall(q2, limit=limit * 2, abstain=False, pool=HOOK_POOL, semantic=False, detail=HOOK_DETAIL)
        q_terms = set(content_words(q2))
        # Only the best of that search: deeper down, a one-word title ("Before merging") is in any reply.
        referents = _referents(r2["hits"], q_terms, hits, P)
        base = base or r2
    short = len(words) < LONG_PROMPT_WORDS
    latin = rerank.latin(prompt)
    kept, gated = hook_gate(hits, referents, short=short, latin=latin, params=P)
    if context.strip() and (short or not hits) and not kept:
        # Only when nothing else passed: the models over prompt + reply tripled the hook's time with a
        # transcript (benchmarks/hook_latency.py), and a prompt that found its note needs no more.
        extra = _with_reply(recall, prompt, context, hits, limit, P)
        if extra:
            kept, gated = hook_gate(hits + extra, referents, short=short, latin=latin, params=P)
    hits = kept
    if base is None:
        base = {"abstained": True, "reason": "the prompt has no searchable words", "hits": []}
    result = {
        **base,
        "hits": hits,
        "abstained": not hits,
        "reason": None if hits else (gated or base.get("reason") or "nothing relevant"),
    }
    pack = build(result, budget=budget, full_text=full_text)
    pack["query"] = prompt
    pack["gate"] = [{"path": h["path"], "kind": h.get("kind"), **(h.get("scoreDetails") or {}).get("hookGate", {})}
                    for h in (r1 or {}).get("hits", []) + extra + referents if (h.get("scoreDetails") or {}).get("hookGate")]
    return pack
