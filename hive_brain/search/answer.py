"""Grounded context packs built from recall: memories, passages, paths and dates, framed as quoted
data (never instructions), under a character budget — or an explicit abstention.

The frame: our header, then ``<hive-brain-recall>``, one ``### title (meta) — path`` line per note
with its text quoted line by line (``> ``), then ``</hive-brain-recall>`` as the last line. Recalled
text cannot leave it: titles, paths and meta are one line each, every line of text is quoted (any
line break Python knows, ``\u2028`` included, starts a new quoted line), and every tag-like ``<``
(``</hive-brain-recall>``, ``</system>``, ``<system-reminder>``...) is shown as ``‹`` so no note can
close our frame or a tag the agent wraps it in (memory/frame.py). A cut to the budget keeps the
closing tag.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..memory.frame import FRAME_CLOSE, FRAME_OPEN, HEADER, one_line
from ..memory.frame import quote as _quote

if TYPE_CHECKING:
    from .recall import View

CONVERSATION_BUDGET = 60_000


def family(hit: dict) -> str:
    """Notes a program saved once per run (same folder, same title but for dates/numbers) form a family."""
    folder = hit["path"].rsplit("/", 1)[0] if "/" in hit["path"] else ""
    title = re.sub(r"[\d_:\-./]+", " ", str(hit.get("title") or "")).strip().lower()
    return f"{folder}|{' '.join(title.split())}"


def fit(context: str, budget: int) -> str:
    """``context`` cut to ``budget`` characters, still ending with the frame's closing tag."""
    if len(context) <= budget:
        return context
    tail = "…\n" + (FRAME_CLOSE + "\n" if context.rstrip().endswith(FRAME_CLOSE) else "")
    return context[: max(0, budget - len(tail))].rstrip() + tail


def day_of(ts: Any) -> str:
    """YYYY-MM-DD of a hit's unix date ('' when it has none)."""
    import time

    try:
        return time.strftime("%Y-%m-%d", time.gmtime(int(ts))) if ts else ""
    except (TypeError, ValueError, OverflowError):
        return ""


def build(result: dict, *, budget: int, full_text: Any = None) -> dict:
    """Turn a recall result into a context pack. `full_text(path) -> str` reads whole conversations."""
    if result.get("abstained") or not result.get("hits"):
        return {
            "abstained": True,
            "reason": result.get("reason") or "nothing relevant",
            "context": "",
            "items": [],
            "chars": 0,
            "recall": {k: result.get(k) for k in ("tier", "semantic", "generation", "warnings", "timing", "mode")
                       if k != "mode" or result.get(k)},
        }
    hits = result["hits"]
    seen_fam: set[str] = set()
    kept = []
    for h in hits:
        if h.get("kind") != "conversation":
            f = family(h)
            if f in seen_fam:
                continue
            seen_fam.add(f)
        kept.append(h)
    conv = [h for h in kept if h.get("kind") == "conversation"]
    parts = [HEADER, "", FRAME_OPEN]
    items: list[dict[str, Any]] = []
    used = sum(len(p) + 1 for p in parts) + len(FRAME_CLOSE) + 1
    if conv and conv[0] is kept[0] and full_text is not None:
        # A question about conversations: whole matching conversations, oldest first.
        cap = min(budget, CONVERSATION_BUDGET)
        for h in sorted(conv, key=lambda h: h.get("date") or 0):
            body = full_text(h["path"])
            block = f"### Conversation: {one_line(h['title'])} ({day_of(h.get('date'))}) — {one_line(h['path'])}\n{_quote(body)}\n"
            if used + len(block) > cap:
                if not items:
                    block = block[: max(0, cap - used - 20)] + "\n> …(truncated)\n"
                else:
                    continue
            parts.append(block)
            used += len(block) + 1
            items.append({"path": h["path"], "id": h.get("id"), "kind": "conversation", "chars": len(block)})
    else:
        for h in kept:
            meta = ", ".join(one_line(x) for x in (h.get("type"), h.get("status") if h.get("status") not in (None, "active") else None,
                                                   day_of(h.get("date")), h.get("id")) if x)
            text = h["passage"]["text"]
            block = f"### {one_line(h['title'])} ({meta}) — {one_line(h['path'])}\n{_quote(text)}\n"
            chain = h.get("evolutionChain") or []
            if chain:
                block += f"(supersedes {len(chain)} earlier version{'s' if len(chain) > 1 else ''}: {', '.join(one_line(c['id']) for c in chain)})\n"
            if used + len(block) > budget:
                room = budget - used - 40
                if room < 200:
                    break
                block = block[:room] + "…\n"
            parts.append(block)
            used += len(block) + 1
            items.append({"path": h["path"], "id": h.get("id"), "kind": h.get("kind"), "score": h.get("score"),
                          "chars": len(block)})
    context = "\n".join(parts).rstrip() + "\n" + FRAME_CLOSE + "\n"
    return {
        "abstained": False,
        "context": context,
        "items": items,
        "chars": len(context),
        "recall": {k: result.get(k) for k in ("tier", "semantic", "generation", "warnings", "time", "timing", "mode")
                   if k != "mode" or result.get(k)},
    }


def answer_view(view: View, query: str, *, agent: str | None, semantic: bool, budget: int | None, **opts: Any) -> dict:
    """Recall on a view and build the pack (the one implementation used in-process and by the server)."""
    from .recall import _full_text, search

    # The pack is built of passages: overview ones (recall's default, full, also reads every hit's note).
    opts.setdefault("detail", "overview")
    res = search(view, query, agent=agent, semantic=semantic, **opts)
    pack = build(res, budget=int(budget) if budget else 60_000, full_text=lambda p: _full_text(view, p, agent))
    pack["query"] = query
    return pack
