"""Recall without an index: a plain scan of the notes for the question's words.

The index is a per-device cache (DESIGN, principle 1), so it can be missing, half built by another
process, damaged and not yet rebuilt, or its state dir gone or unwritable. The notes are still there,
and a question must still be answered from them: :mod:`.view` then opens a view that carries a
:class:`NoteScan` instead of an index, and :func:`~hive_brain.search.recall.search` (so ``recall``,
``answer`` and every front end on them) asks it.

How it ranks, in two passes:

1. Every note the caller may read (judged by its folder first: another agent's folder is never
   opened) is searched for the question's words as plain folded substrings — the analyzed term
   ("deploy") or the word as typed ("deploying"). With ``rg`` (ripgrep) on PATH it picks the files
   that hold any of them; otherwise (and whenever ``rg`` fails) every note is read here, which is a
   few hundred milliseconds for ten thousand notes. Each note gets a BM25 score over those counts.
2. The best few are parsed as the index would read them (frontmatter, secrets scrubbed, split into
   passages): layer, kind, type, project, tags, status and a cutoff are checked on the real
   frontmatter, the counts are taken again on the scrubbed text (a secret's value is never what a
   note is found by), and the passage holding most of the words is the hit's passage.

A note covering under half of the question's words (by rarity) is no answer, the bar the index's
lexical abstention sets; nothing is ranked by meaning, time words only cut off (``as of``), and an
evolution chain is not resolved (a superseded version ranks lower and says so). Every result says it
came from a scan (``mode: "scan"``, a warning naming why and how to rebuild).
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import shutil
import subprocess
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Settings
    from ..store.vault import Vault

SCAN_WARNING = ("the index is unavailable ({why}): answered by scanning the notes for the question's words "
                "(no ranking by meaning); `hive-brain rebuild-index` rebuilds it")
SEMANTIC_OFF = "the index is unavailable (a plain scan of the notes)"
PARSE_TOP = 60  # notes of pass 1 read again as the index would (pass 2)
MIN_COVERAGE = 0.5  # of the question's words, by rarity: less is no answer (recall's lexical bar)
DROP_BELOW = 0.25  # hits scoring under this share of the best one are left off
BUDGET_S = 20.0  # a scan that takes longer answers from what it read, and says so
RG_TIMEOUT_S = 15.0
READ_THREADS = 4
READ_CHUNK = 64  # notes a reading thread takes at a time
K1, B = 1.2, 0.75
_TOKEN_RE = re.compile(r"\w+(?:['\u2019]\w+)*")
_EXCERPT = {"abstract": 280, "overview": 1200}


@dataclass
class _Found:
    path: str
    size: int
    mtime_ns: int
    counts: dict[str, int]
    chars: int
    score: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def rg_path() -> str | None:
    """ripgrep, when it is on PATH and not turned off (``HIVE_BRAIN_SCAN_RG=0``)."""
    if os.environ.get("HIVE_BRAIN_SCAN_RG", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    return shutil.which("rg")


@dataclass
class NoteScan:
    """The notes of ``vault`` as a view without an index reads them (:func:`.view.scan_view`)."""

    vault: Vault
    settings: Settings
    why: str
    budget_s: float = BUDGET_S
    # The latest monotonic time reading may go on to, whatever ``budget_s`` leaves: the prompt hook's
    # deadline less what the best notes' parse and the pack need (a scan begun late must end sooner).
    until: float | None = None
    engine: str = ""  # "ripgrep" or "python": how the last search picked its files

    # -- which notes ----------------------------------------------------------------------------
    def _notes(self) -> dict[str, os.stat_result]:
        """Every note the index would hold (``index.indexer.indexable``'s rules), by path."""
        from ..index.indexer import SKIP_GLOBS, SKIP_PREFIXES
        from ..store.vault import walk_markdown

        limit = int(self.settings.max_note_bytes)
        skip = re.compile("|".join(fnmatch.translate(g) for g in SKIP_GLOBS))
        return {rel: st for rel, st in walk_markdown(self.vault.root)
                if st.st_size <= limit and not rel.startswith(SKIP_PREFIXES) and not skip.match(rel)}

    @staticmethod
    def _may_read(paths: list[str], agent: str | None, include_operational: bool, memory_only: bool) -> list[str]:
        """By folder first: a note in another agent's folder is never opened (frontmatter may only
        narrow what a folder allows, so pass 2 checks the rest on the real frontmatter).
        ``memory_only``: only the folders typed memory lives in (``--scope agent-memory``)."""
        from ..store.catalog import classify
        from ..store.vault import AGENTS_DIR, MEMORY_DIR

        readable = _reader(agent)
        out = []
        for rel in paths:
            kind, layer, owner, _task = classify(rel, {})
            if kind == "proposal" or (kind == "operational" and not include_operational):
                continue
            if memory_only:
                parts = rel.split("/")
                if not (rel.startswith(MEMORY_DIR + "/") or (parts[0] == AGENTS_DIR and parts[2:3] in (["Memory"], ["Tasks"]))):
                    continue
            if readable(layer, owner):
                out.append(rel)
        return out

    def _with_words(self, paths: dict[str, os.stat_result], needles: list[str]) -> list[str]:
        """The paths that may hold a needle: ripgrep's pick, else all of them."""
        rg = rg_path()
        self.engine = "python"
        if rg is None or not paths:
            return list(paths)
        cmd = [rg, "--files-with-matches", "--null", "--ignore-case", "--fixed-strings", "--no-ignore", "--hidden",
               "--no-messages", "--no-config", "--glob", "*.md"]
        for n in needles:
            cmd += ["-e", n]
        try:
            proc = subprocess.run(cmd + ["."], cwd=self.vault.root, capture_output=True, timeout=RG_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            return list(paths)
        if proc.returncode not in (0, 1):  # 1: no file matched; anything else: read them all here
            return list(paths)
        self.engine = "ripgrep"
        found = (p.decode("utf-8", "surrogateescape").removeprefix("./") for p in proc.stdout.split(b"\0") if p)
        return [p for p in found if p in paths]

    # -- the search -----------------------------------------------------------------------------
    def search(self, query: str, *, agent: str | None, scope: str = "tiered", types: list[str] | None = None,
               tags: list[str] | None = None, project: str | None = None, limit: int = 10, as_of: str | None = None,
               include_operational: bool = False, detail: str = "overview", now: Any = None,
               warnings: list[str] | tuple[str, ...] = (), **_ignored: Any) -> dict:
        from .query import analyse

        t0 = time.perf_counter()
        q = analyse(query, now=now, as_of=as_of)
        terms = list(dict.fromkeys(q.terms))
        needles = _needles(query, terms)
        notes = self._notes()
        n_notes = max(1, len(notes))
        deadline = min(time.monotonic() + self.budget_s, self.until if self.until is not None else math.inf)
        found: list[_Found] = []
        partial = False
        if terms:
            flat = sorted({n for ns in needles.values() for n in ns})
            root, cap = str(self.vault.root), int(self.settings.max_note_bytes)
            paths = self._may_read(self._with_words(notes, flat), agent, include_operational, scope == "agent-memory")
            bneedles = {t: [n.encode() for n in ns] for t, ns in needles.items()}

            def count(rel: str) -> _Found | None:
                if time.monotonic() > deadline:
                    return None
                data = _read(root, rel, cap)
                if data is None:
                    return None
                if data.isascii():  # most notes: counted on the bytes, no decoding or folding
                    low = data.lower()
                    counts = {t: c for t in terms if (c := sum(low.count(n) for n in bneedles[t]))}
                    size = len(low)
                else:
                    text = fold(data.decode("utf-8", "replace"))
                    counts = {t: c for t in terms if (c := sum(text.count(n) for n in needles[t]))}
                    size = len(text)
                st = notes[rel]
                return _Found(rel, st.st_size, st.st_mtime_ns, counts, size) if counts else None

            def count_all(chunk: list[str]) -> list[_Found]:
                return [f for f in map(count, chunk) if f is not None]

            # Reading is most of a scan, and a read releases the GIL: a few threads overlap them. In
            # chunks: a thread pool's map ignores ``chunksize``, and a future per note was half of a
            # 10k-note scan's time (0.44 s of 0.94, profiled).
            chunks = [paths[i:i + READ_CHUNK] for i in range(0, len(paths), READ_CHUNK)]
            with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
                found = [f for part in pool.map(count_all, chunks) for f in part]
            partial = time.monotonic() > deadline
        idf = _idf(terms, found, n_notes)
        idf_top = math.log(1.0 + n_notes / 2.0) or 1.0  # the rarest a word can be: in one note
        _bm25(found, idf)
        found.sort(key=lambda f: (-f.details["coverage"], -f.score))
        hits = []
        # Type, project and tag filters are read off the frontmatter (pass 2): with one, read further.
        top = PARSE_TOP * (8 if types or tags or project else 1)
        for f in found[:top]:
            hit = self._hit(f, terms, needles, idf, idf_top, q, agent=agent, scope=scope, types=types, tags=tags,
                            project=project, detail=detail)
            if hit is not None:
                hits.append(hit)
        hits.sort(key=lambda h: -h["score"])
        best = hits[0]["score"] if hits else 0.0
        hits = [h for h in hits if h["scoreDetails"]["coverage"] >= MIN_COVERAGE and h["score"] >= DROP_BELOW * best]
        hits = hits[:limit]
        reason = None
        if not terms:
            reason = "the question has no words to look for"
        elif not hits:
            reason = "no note holds most of the question's words"
        notes_warning = [SCAN_WARNING.format(why=self.why)]
        if partial:
            notes_warning.append(f"the scan stopped after {time.perf_counter() - t0:.1f}s to answer in time: some notes "
                                 "were not read")
        return {
            "query": query,
            "hits": hits if reason is None else [],
            "conflicts": [],
            "abstained": reason is not None,
            "reason": reason,
            "tier": "agent-memory" if scope == "agent-memory" else "full-vault",
            "spelling": {},
            "time": q.time.describe(),
            "generation": None,
            "semantic": False,
            "semanticOff": SEMANTIC_OFF,
            "deep": False,
            "mode": "scan",
            "scan": {"engine": self.engine or "python", "why": self.why, "notes": len(notes), "matched": len(found),
                     "partial": partial},
            "warnings": list(dict.fromkeys([*warnings, *notes_warning])),
            "timing": {"scanMs": round((time.perf_counter() - t0) * 1000, 2),
                       "totalMs": round((time.perf_counter() - t0) * 1000, 2)},
        }

    def _hit(self, f: _Found, terms: list[str], needles: dict[str, list[str]], idf: dict[str, float], idf_top: float,
             q: Any, *,
             agent: str | None, scope: str, types: list[str] | None, tags: list[str] | None, project: str | None,
             detail: str) -> dict | None:
        """Pass 2 for one note: its frontmatter checked, its scrubbed text counted again."""
        from ..errors import NoteError
        from ..index.indexer import note_date
        from ..index.passages import split_passages
        from ..store.catalog import classify
        from ..store.notes import note_tags, read_note

        try:
            note = read_note(self.vault.abs(f.path), f.path, max_bytes=int(self.settings.max_note_bytes), scrub=True)
        except NoteError:
            return None
        meta = note.meta
        kind, layer, owner, _task = classify(f.path, meta)
        if not _readable(agent, layer, owner) or kind == "proposal":
            return None
        if scope == "agent-memory" and kind != "memory":
            return None
        status = str(meta.get("status") or "") if kind == "memory" else ""
        if status == "archived":
            return None
        if types and str(meta.get("type") or "") not in types:
            return None
        if project and str(meta.get("project") or "") != project:
            return None
        if tags:
            want = {t.lower().lstrip("#") for t in tags}
            if not want & {t.lower().lstrip("#") for t in note_tags(meta, note.body)}:
                return None
        date = note_date(meta, f.mtime_ns, kind)
        if q.cutoff is not None and date > q.cutoff:
            return None
        title = note.title
        body = fold(title + "\n" + note.body)
        counts = {t: c for t in terms if (c := sum(body.count(n) for n in needles[t]))}
        if not counts:
            return None  # found only by what scrubbing removed (a secret's value)
        f.counts, f.chars = counts, len(body)
        total = sum(idf.values()) or 1.0
        coverage = sum(idf[t] for t in counts) / total
        ftitle = fold(title)
        title_cov = sum(idf[t] for t in terms if any(n in ftitle for n in needles[t])) / total
        score = sum(idf[t] * (c * (K1 + 1)) / (c + K1) for t, c in counts.items())
        score *= (0.5 + coverage) * (1.0 + 0.5 * title_cov)
        if status == "superseded":
            score *= 0.5  # a later version says what is current now (not resolved without the catalog)
        passages = split_passages(title, note.body)
        best = max(passages, key=lambda p: sum(fold(p.text).count(n) for t in counts for n in needles[t]),
                   default=None)
        text = best.text if best is not None else note.body
        hit: dict[str, Any] = {
            "path": f.path,
            "id": note.id if kind == "memory" else (note.id or None),
            "title": title,
            "kind": kind,
            "type": meta.get("type") if kind == "memory" else None,
            "status": status or None,
            "date": date,
            "score": round(score, 6),
            "passage": {"passageId": f"{f.path}#{best.index if best is not None else 0}",
                        "heading": best.heading if best is not None else "", "text": _excerpt(text, detail)},
            "passages": [],
            "scoreDetails": {"scan": True, "coverage": round(coverage, 4), "titleCoverage": round(title_cov, 4),
                             "specificity": round(min(1.0, max(idf[t] for t in counts) / idf_top), 4),
                             "matchedTerms": sorted(counts), "termCounts": dict(sorted(counts.items())),
                             "missingTerms": [t for t in terms if t not in counts]},
        }
        if detail == "full":
            hit["content"] = note.body
        return hit

    def full_text(self, path: str, agent: str | None = None) -> str:
        """A note's whole scrubbed text, as recall's ``detail=full`` and answer's conversations read it."""
        from ..errors import NoteError
        from ..store.catalog import classify
        from ..store.notes import read_note

        try:
            note = read_note(self.vault.abs(path), path, max_bytes=int(self.settings.max_note_bytes), scrub=True)
        except (NoteError, OSError, ValueError):
            return ""
        _kind, layer, owner, _task = classify(path, note.meta)
        return note.body if _readable(agent, layer, owner) else ""


def _reader(agent: str | None) -> Any:
    """``readable(layer, owner)`` for ``agent``: the rule every search applies (memory.layers.visibility)."""
    from ..index.predicates import matches
    from ..memory.layers import visibility

    pred = visibility(agent)
    return lambda layer, owner: matches(pred, {"layer": layer, "agent": owner})


def _readable(agent: str | None, layer: str, owner: str) -> bool:
    return bool(_reader(agent)(layer, owner))


_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")


def fold(text: str) -> str:
    """Lower case without accents, for substring counts: the analyzer's table (index.textproc.fold)
    per character cost a 10k-note scan a second; NFKD and a regex over the marks run in C."""
    if text.isascii():
        return text.lower()
    return _COMBINING.sub("", unicodedata.normalize("NFKD", text)).replace("\u2019", "'").lower()


def _needles(query: str, terms: list[str]) -> dict[str, list[str]]:
    """Per analyzed term, the folded strings that count as it in a note: the term ("deploy") and the
    words of the question it came from ("deploying"), without any that holds another (counted twice)."""
    from ..index.textproc import content_words

    forms: dict[str, set[str]] = {t: {t} for t in terms}
    for tok in _TOKEN_RE.findall(fold(query)):
        for t in content_words(tok):
            if t in forms and len(tok) >= len(t):
                forms[t].add(tok.replace("\u2019", "'"))
    return {t: sorted(n for n in ns if not any(m != n and m in n for m in ns)) for t, ns in forms.items()}


def _read(root: str, rel: str, limit: int) -> bytes | None:
    try:
        with open(os.path.join(root, rel), "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit or b"\x00" in data[:8192]:
        return None  # over the note limit, or binary: not a note the index would hold
    return data


def _idf(terms: list[str], found: list[_Found], n: int) -> dict[str, float]:
    df = {t: 0 for t in terms}
    for f in found:
        for t in f.counts:
            df[t] += 1
    # The index's own weights (LexicalIndex.term_weights): coverage and specificity then mean what they
    # mean on an index hit, and the prompt hook's gate judges a scan hit on the same scale.
    known = sorted(math.log(1.0 + n / (1.0 + d)) for d in df.values() if d)
    typical = known[len(known) // 2] if known else 1.0
    return {t: math.log(1.0 + n / (1.0 + d)) if d else typical for t, d in df.items()}


def _bm25(found: list[_Found], idf: dict[str, float]) -> None:
    avg = sum(f.chars for f in found) / len(found) if found else 1.0
    total = sum(idf.values()) or 1.0
    for f in found:
        norm = K1 * (1 - B + B * f.chars / max(avg, 1.0))
        f.score = sum(idf[t] * c * (K1 + 1) / (c + norm) for t, c in f.counts.items())
        f.details["coverage"] = sum(idf[t] for t in f.counts) / total


def _excerpt(text: str, detail: str) -> str:
    text = text.strip()
    cap = _EXCERPT.get(detail)
    if detail == "abstract":
        text = text.split("\n\n", 1)[0]
    return text if cap is None or len(text) <= cap else text[:cap] + "…"
