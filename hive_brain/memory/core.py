"""Core memory: what every agent session starts with.

The vault's ``Memory/Core Memory.md``, the agent's own ``Agents/<id>/Core Memory.md``, then the
standing rules drawn from typed memory — the user's instructions, preferences and decisions
(shared layer, origin user), the lessons answers keep using (this device's usage log, final-answer
use first; any lesson the caller may read, never another agent's private one) and the agent's own
lessons (its private layer) — de-duplicated and cut to a character budget, most important first.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Any

from .ports import EngineLike

if TYPE_CHECKING:
    from ..store.catalog import Entry

# Order is importance: what is cut first when the budget runs out is at the end.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("instruction", "Instructions from the user"),
    ("preference", "Preferences"),
    ("decision", "Decisions"),
    ("used-lesson", "Lessons answers keep using"),
    ("lesson", "Lessons learned"),
)
# Lessons are what agents learned and wrote, not rules the user gave: they reach a session framed
# as recalled data (memory/frame.py), as every other read does, tags in them neutralised.
FRAMED = frozenset({"used-lesson", "lesson"})
# The memory types those sections draw on (only these are read from the catalog).
CORE_TYPES = tuple(dict.fromkeys("lesson" if t == "used-lesson" else t for t, _ in SECTIONS))
MAX_ITEM_CHARS = 700
CORE_NOTE_CHARS = 3000  # DESIGN: a Core Memory note is kept under about 3,000 characters (read at every start)
USED_LESSONS = 5  # the "keep using" section is short: the few lessons answers lean on most
USED_ITEM_CHARS = 300
USED_MIN_RETRIEVED = 3  # a lesson recalls merely returned counts from this many; one an answer used, from one
HEADER = (
    "Core memory from the user's hive-brain vault: who the user is, how they work, and the standing rules "
    "they asked for. The user's current request takes precedence. Look up more with hive-brain recall."
)
_EMPTY_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])(?:\s+\[ \])?\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s")


def clean_core_body(body: str) -> str:
    """The note body without the template's empty bullets and headings left with nothing under them."""
    lines = [ln.rstrip() for ln in body.splitlines() if not _EMPTY_BULLET.match(ln)]
    # Drop a heading when the next non-blank line is a heading of the same or a higher level (or nothing).
    keep: list[str] = []
    for i, ln in enumerate(lines):
        m = _HEADING.match(ln)
        if m:
            level = len(m.group(1))
            nxt = next((x for x in lines[i + 1 :] if x.strip()), None)
            if nxt is None:
                continue
            mn = _HEADING.match(nxt)
            if mn and len(mn.group(1)) <= level:
                continue
        keep.append(ln)
    text = "\n".join(keep)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _template_core() -> str:
    from ..store.notes import parse_text
    from ..store.vault import CORE_MEMORY, template_dir

    try:
        raw = (template_dir() / CORE_MEMORY).read_text(encoding="utf-8")
    except Exception:  # noqa: BLE001 - without the template every non-empty core note counts
        return ""
    return clean_core_body(parse_text(CORE_MEMORY, raw).body)


# A server answers `core` again and again from the same notes: their scrubbed bodies by the catalog's
# hash of the bytes, so an unchanged note is not read, parsed and scanned for secrets again (every
# user-stated decision, preference and instruction: ~80 notes, half of a 1k-note `core` request).
_BODIES: dict[tuple[str, str, str, int], str | None] = {}
_BODIES_MAX = 4096


def _read_body(engine: EngineLike, rel: str, sha: str = "") -> str | None:
    from ..errors import NoteError
    from ..store.notes import read_note

    key = (str(engine.vault.root), rel, sha, engine.settings.max_note_bytes)
    if sha and key in _BODIES:
        return _BODIES[key]
    p = engine.vault.root / rel
    if not p.is_file():
        return None
    try:
        note = read_note(p, rel, max_bytes=engine.settings.max_note_bytes, scrub=True)  # injected: never a secret
    except NoteError:
        return None
    body = None if note.problem else note.body
    if sha and note.raw_sha256 == sha:  # the bytes the catalog hashed, not an edit since
        if len(_BODIES) >= _BODIES_MAX:
            _BODIES.clear()
        _BODIES[key] = body
    return body


def _updated(e: Entry) -> str:
    return str(e.meta.get("updated") or e.meta.get("created") or "")


def core_items(engine: EngineLike, agent: str | None, budget: int = 6000, *, refresh: bool = True) -> list[dict]:
    """The core memory items that fit ``budget`` characters, most important first.

    Each item: ``{"section", "title", "path", "id", "type", "text"}``.
    """
    from ..store.vault import AGENTS_DIR, CORE_MEMORY

    cat = engine.catalog
    if refresh:
        cat.refresh()
    items: list[dict] = []
    body = _read_body(engine, CORE_MEMORY)
    if body is not None:
        text = clean_core_body(body)
        # A core note still equal to the template says nothing about the user.
        if text and text != _template_core():
            items.append(
                {
                    "section": "core",
                    "title": "Core Memory",
                    "path": CORE_MEMORY,
                    "id": None,
                    "type": "core",
                    "text": text,
                }
            )
    if agent:
        rel = f"{AGENTS_DIR}/{agent}/Core Memory.md"
        body = _read_body(engine, rel)
        if body is not None and (text := clean_core_body(body)):
            items.append(
                {
                    "section": "agent-core",
                    "title": f"Core Memory of {agent}",
                    "path": rel,
                    "id": None,
                    "type": "core",
                    "text": text,
                }
            )
    seen_hash: set[str] = set()
    seen_key: set[str] = set()
    mems = [e for e in cat.memories(types=CORE_TYPES) if e.status == "active" and not e.problem]
    for mtype, _label in SECTIONS:
        uses: dict[str, list[float]] = {}
        if mtype == "used-lesson":
            pool, uses = _most_used_lessons(engine, mems, agent)
        elif mtype == "lesson":
            if not agent:
                continue
            pool = [
                e
                for e in mems
                if e.layer == "private" and e.agent == agent and str(e.meta.get("type")) == "lesson"
            ]
        else:
            pool = [
                e
                for e in mems
                if e.layer == "shared"
                and str(e.meta.get("type")) == mtype
                and str(e.meta.get("origin") or "") == "user"
            ]
        if mtype != "used-lesson":  # that one is already in order of use
            pool.sort(key=lambda e: (_updated(e), e.path), reverse=True)
        limit = USED_LESSONS if mtype == "used-lesson" else len(pool)
        for e in pool:
            if limit <= 0:
                break
            if (e.content_hash and e.content_hash in seen_hash) or (
                e.memory_key and e.memory_key in seen_key
            ):
                continue
            body = _read_body(engine, e.path, e.sha)
            if body is None or not body.strip():
                continue
            if e.content_hash:
                seen_hash.add(e.content_hash)
            if e.memory_key:
                seen_key.add(e.memory_key)
            text = " ".join(body.split()) if len(body) < 300 else body.strip()
            cap = USED_ITEM_CHARS if mtype == "used-lesson" else MAX_ITEM_CHARS
            if len(text) > cap:
                text = text[:cap].rstrip() + "…"
            item = {"section": mtype, "title": e.title, "path": e.path, "id": e.id or None,
                    "type": "lesson" if mtype == "used-lesson" else mtype, "text": text}
            if mtype == "used-lesson":
                c = uses[e.id]
                item["uses"] = {"finalAnswer": int(c[1]), "retrieved": int(c[0])}
            items.append(item)
            limit -= 1
    return _fit(items, budget, agent)


def _most_used_lessons(engine: EngineLike, mems: list[Any], agent: str | None) -> tuple[list[Any], dict[str, list[float]]]:
    """The active lessons the caller may read that answers on this device keep using: final-answer
    use first, then retrieval, then the most recent (twice ``USED_LESSONS`` are offered: the caller
    shows that many, skipping what an earlier section already holds). The owner (no agent) reads the shared layer only,
    an agent also its own private lessons; another agent's private lesson never appears."""
    from .layers import may_open
    from .usage import table

    counts = table(engine.vault.state).counts
    if not counts:
        return [], {}
    pool = []
    for e in mems:
        c = counts.get(e.id) if e.id else None
        if c is None or str(e.meta.get("type")) != "lesson" or not may_open(e, agent):
            continue
        if c[1] >= 1 or c[0] >= USED_MIN_RETRIEVED:
            pool.append(e)
    pool.sort(key=lambda e: (counts[e.id][1], counts[e.id][0], counts[e.id][2], e.path), reverse=True)
    return pool[: USED_LESSONS * 2], {e.id: counts[e.id] for e in pool}


def _section_title(section: str, agent: str | None) -> str:
    if section == "lesson":
        return f"Lessons learned by {agent}"
    return dict(SECTIONS).get(section, section)


def _render_item(it: dict) -> str:
    if it["section"] in ("core", "agent-core"):
        return it["text"]
    if it["section"] in FRAMED:
        from .frame import one_line, quote

        return f"### {one_line(it['title'])} ({one_line(it.get('id') or it['type'])}) — {one_line(it['path'])}\n{quote(it['text'])}"
    return (
        f"- **{it['title']}**: {it['text']} ({it['id']})"
        if it.get("id")
        else f"- **{it['title']}**: {it['text']}"
    )


def _opening(it: dict, agent: str | None) -> list[str]:
    """The lines that open ``it``'s section: its heading, and the recall frame around lessons."""
    if it["section"] in FRAMED:
        from .frame import FRAME_OPEN
        from .frame import HEADER as FRAME_HEADER

        return [_section_heading(it, agent), "", FRAME_HEADER, FRAME_OPEN]
    return [_section_heading(it, agent), ""]


def _closing(section: str | None) -> list[str]:
    from .frame import FRAME_CLOSE

    return [FRAME_CLOSE] if section in FRAMED else []


def _fit(items: list[dict], budget: int, agent: str | None) -> list[dict]:
    kept: list[dict] = []
    used = len(HEADER) + 2
    section = None
    for it in items:
        head = 0
        if it["section"] != section:
            head = sum(len(x) + 1 for x in (*_opening(it, agent), *_closing(it["section"])))
        block = _render_item(it)
        if used + head + len(block) + 1 > budget:
            room = budget - used - head - 1
            # A core note is the most important thing: keep its beginning rather than nothing.
            if it["section"] in ("core", "agent-core") and room > 200:
                it = {**it, "text": it["text"][: room - 2].rstrip() + "…", "truncated": True}
                kept.append(it)
                used += head + len(_render_item(it)) + 1
                section = it["section"]
            continue
        kept.append(it)
        used += head + len(block) + 1
        section = it["section"]
    return kept


def _section_heading(it: dict, agent: str | None) -> str:
    if it["section"] in ("core", "agent-core"):
        return f"## {it['title']} ({it['path']})"
    return f"## {_section_title(it['section'], agent)}"


def render(items: list[dict], agent: str | None) -> str:
    if not items:
        return ""
    out = [HEADER, ""]
    section = None
    for it in items:
        if it["section"] != section:
            out += _closing(section)
            if section is not None:
                out.append("")
            out += _opening(it, agent)
            section = it["section"]
        out.append(_render_item(it))
    out += _closing(section)
    return "\n".join(out).rstrip() + "\n"


def oversized_core(engine: EngineLike, agent: str | None) -> list[str]:
    """A warning for each Core Memory note (the vault's, the agent's) over :data:`CORE_NOTE_CHARS`."""
    from ..store.vault import AGENTS_DIR, CORE_MEMORY

    out = []
    for rel in (CORE_MEMORY, *([f"{AGENTS_DIR}/{agent}/Core Memory.md"] if agent else [])):
        body = _read_body(engine, rel)
        n = len(clean_core_body(body)) if body is not None else 0
        if n > CORE_NOTE_CHARS:
            out.append(f"{rel} is {n:,} characters, {n - CORE_NOTE_CHARS:,} over the {CORE_NOTE_CHARS:,} it should "
                       "keep under (every session starts with it: move details into typed memories with "
                       "`hive-brain remember`)")
    return out


# Finished packs of a long-lived process (the server, MCP), each with the marks of what it was derived
# from (:func:`_inputs`): at 10k notes a pack is ~2,400 catalog rows parsed and ~800 candidates sorted
# and fitted (60-80 ms), and most requests find none of its inputs changed.
_PACKS: dict[tuple, tuple[tuple, dict[str, Any]]] = {}
_PACKS_MAX = 64
_PACKS_LOCK = threading.Lock()


def _inputs(engine: EngineLike, agent: str | None) -> tuple:
    """Marks that change whenever what :func:`core_items` reads may have: the catalog rows of the core
    types (any writer's, derived status included: ``Catalog.change_mark``), this device's usage counts
    (a recall or answer that used a lesson) and the Core Memory notes, which are read from disk (their
    stat, as the catalog judges a note changed). Read before the pack is derived, so a change meanwhile
    leaves a mark that differs next time."""
    from ..store.vault import AGENTS_DIR, CORE_MEMORY
    from .usage import table

    stats: list[tuple[int, ...] | None] = []
    for rel in (CORE_MEMORY, *([f"{AGENTS_DIR}/{agent}/Core Memory.md"] if agent else [])):
        try:
            st = os.stat(engine.vault.root / rel)
            stats.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        except OSError:
            stats.append(None)
    return engine.catalog.change_mark(CORE_TYPES), table(engine.vault.state).version, tuple(stats)


def _copy(pack: dict[str, Any]) -> dict[str, Any]:
    return {**pack, "items": [dict(it) for it in pack["items"]], "warnings": list(pack["warnings"])}


def core_pack(engine: EngineLike, agent: str | None, budget: int = 6000, *, refresh: bool = True) -> dict[str, Any]:
    """Core memory under ``budget`` characters: ``{agent, budget, chars, items, text, warnings}`` (text ""
    when the vault holds none). What ``hive-brain core`` prints, in-process or from the server
    (``refresh=False``: its indexing loop keeps the catalog current)."""
    if refresh:
        engine.catalog.refresh()
    key = (str(engine.catalog.path), str(engine.vault.root), engine.settings.max_note_bytes, agent, budget)
    marks = _inputs(engine, agent)
    kept = _PACKS.get(key)
    if kept is not None and kept[0] == marks:
        return _copy(kept[1])
    items = core_items(engine, agent, budget, refresh=False)
    text = render(items, agent)
    while items and len(text) > budget:  # the fit above is an estimate; the budget is a promise
        items.pop()
        text = render(items, agent)
    pack = {"agent": agent, "budget": budget, "chars": len(text), "items": items, "text": text,
            "warnings": oversized_core(engine, agent)}
    with _PACKS_LOCK:
        if len(_PACKS) >= _PACKS_MAX:
            _PACKS.clear()
        _PACKS[key] = (marks, _copy(pack))
    return pack


def core_text(engine: EngineLike, agent: str | None, budget: int = 6000) -> str:
    """Core memory as Markdown under ``budget`` characters ("" when the vault holds none)."""
    return str(core_pack(engine, agent, budget)["text"])
