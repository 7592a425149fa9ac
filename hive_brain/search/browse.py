"""Extractive folder summaries for `hive-brain browse` (no LLM): what a folder holds, in about 100
tokens (`abstract`) or about 2,000 (`overview`).

Summaries are derived from the notes of the current generation and cached per generation under
`<state>/index/browse/`, so they are rebuilt after every index change and cost nothing otherwise.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

from ..errors import NotFound, UsageError
from ..memory.layers import may_open
from ..memory.ports import EngineLike
from ..store.fsutil import atomic_write_text
from ..store.notes import read_note

ABSTRACT_CHARS = 400  # ~100 tokens
OVERVIEW_CHARS = 8000  # ~2,000 tokens
_SENT = re.compile(r"(?<=[.!?。！？])\s+")


_WORD = re.compile(r"[^\W\d_][\w'-]{2,}")


def _words(text: str) -> list[str]:
    """Readable keywords (surface forms, not stems): lowercase words minus stop words."""
    from ..index.textproc import STOP_WORDS

    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOP_WORDS]


def _first_sentence(body: str, title: str = "") -> str:
    for line in body.splitlines():
        line = line.strip().lstrip("#>-*0123456789. ").strip()
        if len(line) > 3 and line != title:
            return _SENT.split(line, maxsplit=1)[0][:240]
    return ""


def summarize(engine: EngineLike, path: str, detail: str = "overview") -> dict[str, Any]:
    if detail not in ("abstract", "overview"):
        raise UsageError("--detail must be abstract or overview")
    folder = path.strip().strip("/")
    if ".." in folder.split("/"):
        raise UsageError("the path must stay inside the vault")
    if folder and not (engine.vault.root / folder).is_dir():
        raise NotFound(f"no folder {folder!r} in the vault", hint="list folders with `hive-brain browse`")
    view_gen = engine.indexer.gens.current_id()
    agent = engine.settings.agent_id
    # Keyed by who reads: a summary quotes titles and first sentences of every note its reader may see,
    # so one reader's summary must never be served to another (agent ids are path-safe: validated).
    reader = f"agent-{agent}" if agent else "shared"
    name = f"{view_gen}-{reader}-{detail}-{re.sub(r'[^A-Za-z0-9]+', '_', folder) or 'root'}.json"
    cache = engine.vault.state / "index" / "browse" / name
    if cache.exists():
        try:
            return json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    engine.catalog.refresh()
    prefix = f"{folder}/" if folder else ""
    entries = [e for e in engine.catalog.all() if e.path.startswith(prefix) and e.kind not in ("broken", "proposal")
               and e.status not in ("superseded", "archived")
               and may_open(e, agent)]
    sub: Counter[str] = Counter()
    direct = []
    for e in entries:
        rest = e.path[len(prefix):]
        if "/" in rest:
            sub[rest.split("/", 1)[0]] += 1
        else:
            direct.append(e)
    df: Counter[str] = Counter()
    tf: Counter[str] = Counter()
    lines = []
    for e in sorted(entries, key=lambda e: str(e.meta.get("updated") or e.meta.get("date") or ""), reverse=True):
        try:
            note = read_note(engine.vault.root / e.path, e.path, max_bytes=engine.settings.max_note_bytes, scrub=True)
        except Exception:  # noqa: BLE001 - unreadable notes are doctor's business, not browse's
            continue
        words = _words(e.title + " " + note.body[:4000])
        tf.update(words)
        df.update(set(words))
        lines.append((e, _first_sentence(note.body, e.title)))
    n = max(1, len(lines))
    keywords = [w for w, _ in sorted(tf.items(), key=lambda kv: -kv[1] * math.log(1 + n / df[kv[0]]))
                if len(w) > 2 and not w.isdigit()][:12]
    budget = ABSTRACT_CHARS if detail == "abstract" else OVERVIEW_CHARS
    head = f"{folder or '(vault)'}: {len(entries)} notes" + (f" in {len(sub)} subfolders" if sub else "")
    text = [head, "keywords: " + ", ".join(keywords[: 6 if detail == "abstract" else 12])]
    if sub:
        text.append("subfolders: " + ", ".join(f"{k} ({v})" for k, v in sub.most_common(8 if detail == "abstract" else 40)))
    used = sum(len(t) + 1 for t in text)
    items = []
    for e, first in lines:
        line = f"- {e.title}" + (f" ({e.meta.get('type')})" if e.meta.get("type") else "") + (f": {first}" if detail == "overview" and first else "")
        if used + len(line) + 1 > budget:
            break
        text.append(line)
        used += len(line) + 1
        items.append({"path": e.path, "title": e.title, "type": e.meta.get("type"), "first": first})
    res = {"path": folder, "detail": detail, "generation": view_gen, "notes": len(entries),
           "subfolders": dict(sub.most_common()), "keywords": keywords, "items": items, "summary": "\n".join(text)}
    try:
        atomic_write_text(cache, json.dumps(res, ensure_ascii=False))
    except OSError:
        pass
    return res
