"""Heading-aware passage splitting: the unit that is indexed, embedded and scored.

DESIGN ("Recall", "Embeddings"): a long note is split at headings so a passage, not the whole note,
is scored and returned; dense retrieval works on ~200-token windows with the note title and date in
front (:func:`embed_text`), and on conversations a window must hold whole turns.

Rules:

* Split at ATX headings (``#`` .. ``######`` followed by a space or end of line; ``#tag`` is an
  Obsidian tag, not a heading), ignoring lines inside ``````` / ``~~~`` fences.
* Adjacent short sections are merged while the result fits the budget (the later headings stay
  in the text as lines so nothing is lost); a long section is cut into windows on paragraph,
  then sentence, then line, then word boundaries, with a small overlap (the previous window's last
  unit when it is short).
* Conversation sections (most lines are turns such as ``**Ann** (D3:4): ...`` or ``- Ann: ...``)
  are windowed by whole turns.
* The budget is ``max_words`` minus the words of the title/date prefix that :func:`embed_text`
  puts in front, so prefix + passage stays near the embedder's window. CJK and other scripts
  without spaces count :data:`CHARS_PER_WORD` characters as one word (multilingual tokenizers
  spend about one token per CJK character; 200 "words" of English are ~260 tokens).
* Always at least one passage, even for an empty body, so a note stays findable by its title.

``Passage.start_line`` is the 1-based line number in ``body`` where the passage begins (its
heading line when it starts a section). ``Passage.text`` excludes the passage's own leading heading
line (that is ``Passage.heading``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .textproc import count_segmentless, has_segmentless, without_segmentless

CHARS_PER_WORD = 1.5
MIN_BUDGET_FRACTION = 0.5  # the title prefix never shrinks the budget below half of max_words

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_HEADING_CLOSE_RE = re.compile(r"[ \t]+#+$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MAYBE_HEADING_RE = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.MULTILINE)
_SENTENCE_RE = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")
# A conversation turn: optional list bullet, a speaker (bold, or 1-4 capitalised-ish words),
# optional "(D3:4)"-style reference or timestamp, then a colon. "**Ann:** text" is covered too.
_TURN_RE = re.compile(
    r"^\s{0,3}(?:[-*+]\s+)?(?:"
    r"\*\*[^*\n]{1,60}?:\*\*"
    r"|\*\*[^*\n]{1,60}?\*\*\s*(?:\([^)\n]{0,40}\)|\[[^\]\n]{0,40}\])?\s*:"
    r"|[^\W\d_][\w.'\-]{0,30}(?:[ ][\w.'\-]{1,30}){0,3}\s*(?:\([^)\n]{0,40}\)|\[[^\]\n]{0,40}\])?\s*:"
    r")\s"
)
_SPEAKER_RE = re.compile(r"^\s{0,3}(?:[-*+]\s+)?\**([^*:(\[\n]{1,60}?)\**\s*(?:[(\[]|:)")


@dataclass(frozen=True, slots=True)
class Passage:
    index: int
    heading: str
    text: str
    start_line: int


def count_words(text: str) -> int:
    """Whitespace words, with runs of CJK (etc.) counted as ``len / CHARS_PER_WORD`` words."""
    n_seg = count_segmentless(text)
    if not n_seg:
        return len(text.split())
    return len(without_segmentless(text).split()) + int(n_seg / CHARS_PER_WORD + 0.999)


@dataclass
class _Section:
    heading: str
    level: int
    start_line: int  # 1-based line of the heading (or of the first body line for the preamble)
    lines: list[str]
    heading_line: str | None  # the raw heading line, None for the preamble


@dataclass
class _Unit:
    text: str
    line: int  # 1-based line where the unit starts
    words: int


def _sections(lines: list[str]) -> list[_Section]:
    secs = [_Section("", 0, 1, [], None)]
    fence: str | None = None
    for i, line in enumerate(lines, start=1):
        fm = _FENCE_RE.match(line)
        if fence is not None:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence) and not line.strip(
            ).lstrip(fence[0]):
                fence = None
            secs[-1].lines.append(line)
            continue
        if fm:
            fence = fm.group(1)
            secs[-1].lines.append(line)
            continue
        hm = _HEADING_RE.match(line)
        if hm:
            title = _HEADING_CLOSE_RE.sub("", hm.group(2) or "").strip()
            secs.append(_Section(title, len(hm.group(1)), i, [], line))
            continue
        secs[-1].lines.append(line)
    if len(secs) > 1 and not any(x.strip() for x in secs[0].lines):
        secs.pop(0)  # blank preamble before the first heading
    return secs


def _blocks(lines: list[str], first_line: int) -> list[_Unit]:
    """Paragraphs (blank-line separated), with fenced code kept as one block."""
    out: list[_Unit] = []
    cur: list[str] = []
    start = first_line
    fence: str | None = None

    def flush() -> None:
        nonlocal cur
        if cur:
            text = "\n".join(cur).strip("\n")
            if text.strip():
                out.append(_Unit(text, start, count_words(text)))
        cur = []

    for off, line in enumerate(lines):
        fm = _FENCE_RE.match(line)
        if fence is None and fm:
            flush()
            start = first_line + off
            fence = fm.group(1)
            cur.append(line)
            continue
        if fence is not None:
            cur.append(line)
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = None
                flush()
            continue
        if not line.strip():
            flush()
            continue
        if not cur:
            start = first_line + off
        cur.append(line)
    flush()
    return out


def _is_conversation(lines: list[str]) -> bool:
    nonblank = [x for x in lines if x.strip()]
    if len(nonblank) < 3:
        return False
    turns = [x for x in nonblank if _TURN_RE.match(x)]
    if len(turns) < 3 or len(turns) * 2 < len(nonblank):
        return False
    speakers = set()
    for t in turns:
        m = _SPEAKER_RE.match(t)
        if m:
            speakers.add(m.group(1).strip().lower())
    return len(speakers) >= 2


def _turns(lines: list[str], first_line: int) -> list[_Unit]:
    out: list[_Unit] = []
    cur: list[str] = []
    start = first_line

    def flush() -> None:
        nonlocal cur
        text = "\n".join(cur).strip("\n")
        if text.strip():
            out.append(_Unit(text, start, count_words(text)))
        cur = []

    for off, line in enumerate(lines):
        if _TURN_RE.match(line):
            flush()
            start = first_line + off
            cur.append(line)
        elif not line.strip():
            continue
        else:
            if not cur:
                start = first_line + off
            cur.append(line)  # continuation of the current turn
    flush()
    return out


def _split_unit(u: _Unit, budget: int) -> list[_Unit]:
    """Break one oversized unit into pieces that fit: sentences, then lines, then words/chars.

    Pieces keep their trailing separators and are re-joined with "" so the text (code, CJK
    without spaces) comes back byte-identical.
    """
    if u.words <= budget:
        return [u]
    pieces = _keep_separators(_SENTENCE_RE, u.text)
    if len(pieces) <= 1:
        pieces = u.text.splitlines(keepends=True)
    if len(pieces) <= 1:
        return _hard_split(u, budget)
    out: list[_Unit] = []
    line = u.line
    for p in pieces:
        sub = _Unit(p, line, count_words(p))
        out.extend(_hard_split(sub, budget) if sub.words > budget else [sub])
        line += p.count("\n")
    # Re-pack the pieces into groups that fit so the outer packer sees fewer, fuller units.
    return [_Unit(x.text.strip(), x.line, x.words) for x in _pack_units(out, budget, overlap_words=0, joiner="")]


def _keep_separators(rx: re.Pattern[str], text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    for m in rx.finditer(text):
        if m.end() > pos:
            out.append(text[pos : m.end()])
            pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return [p for p in out if p.strip()]


def _hard_split(u: _Unit, budget: int) -> list[_Unit]:
    """Last resort for a single over-long sentence/line: cut on words, or on characters for CJK."""
    text = u.text
    words = text.split()
    if len(words) > 1 and not has_segmentless(text):
        return [
            _Unit(" ".join(words[i : i + budget]), u.line, len(words[i : i + budget]))
            for i in range(0, len(words), budget)
        ]
    step = max(1, int(budget * CHARS_PER_WORD))
    chunks = [text[i : i + step] for i in range(0, len(text), step)]
    return [_Unit(c, u.line, count_words(c)) for c in chunks if c.strip()]


def _pack_units(units: list[_Unit], budget: int, *, overlap_words: int, joiner: str) -> list[_Unit]:
    windows: list[_Unit] = []
    cur: list[_Unit] = []
    cur_words = 0
    carried = False  # cur[0] repeats the previous window's last unit
    for u in units:
        if cur and cur_words + u.words > budget:
            windows.append(_join(cur, joiner))
            last = cur[-1]
            # Carry the previous window's last unit when short, so a turn keeps its neighbour.
            if overlap_words and last.words <= overlap_words and last.words + u.words <= budget:
                cur, cur_words, carried = [last], last.words, True
            else:
                cur, cur_words, carried = [], 0, False
        cur.append(u)
        cur_words += u.words
    if cur:
        fresh = cur[1:] if carried else cur
        fresh_words = sum(x.words for x in fresh)
        # A tiny tail is folded into the previous window instead of standing alone.
        if windows and fresh_words < budget // 4 and windows[-1].words + fresh_words <= budget + budget // 4:
            windows.append(_join([windows.pop(), *fresh], joiner))
        elif fresh:
            windows.append(_join(cur, joiner))
    return windows


def _join(units: list[_Unit], joiner: str) -> _Unit:
    return _Unit(joiner.join(u.text for u in units), units[0].line, sum(u.words for u in units))


def _section_units(sec: _Section, budget: int, conversation: bool | None) -> tuple[list[_Unit], bool]:
    first = sec.start_line + (1 if sec.heading_line is not None else 0)
    conv = _is_conversation(sec.lines) if conversation is None else conversation
    units = _turns(sec.lines, first) if conv else _blocks(sec.lines, first)
    split: list[_Unit] = []
    for u in units:
        split.extend(_split_unit(u, budget))
    return split, conv


def split_passages(
    title: str,
    body: str,
    *,
    max_words: int = 200,
    date: str | None = None,
    conversation: bool | None = None,
) -> list[Passage]:
    """Split a note body into passages of about ``max_words`` words (see module docstring).

    ``title`` and ``date`` only shrink the budget by the length of the prefix that
    :func:`embed_text` will add. ``conversation`` forces (True) or disables (False) turn-based
    windowing; None detects it per section.
    """
    body = body or ""
    prefix_words = count_words(title or "") + (1 if date else 0)
    budget = max(int(max_words * MIN_BUDGET_FRACTION), max_words - prefix_words, 1)

    # Fast path, the common case: a short note without headings is one passage.
    if not _MAYBE_HEADING_RE.search(body) and count_words(body) <= budget:
        text = body.strip("\n")
        first = _first_content_line(body)
        return [Passage(0, "", text.strip(), first)]

    lines = body.splitlines()
    sections = _sections(lines)
    raw: list[tuple[str, int, str, int]] = []  # heading, level, text, start_line
    pending: list[tuple[_Section, str, int]] = []  # short sections waiting to be merged

    def flush_pending() -> None:
        if not pending:
            return
        head, lvl = pending[0][0].heading, pending[0][0].level
        parts = []
        for i, (sec, text, _w) in enumerate(pending):
            if i and sec.heading_line is not None:
                parts.append(sec.heading_line.strip() + ("\n" + text if text else ""))
            elif text:
                parts.append(text)
        raw.append((head, lvl, "\n\n".join(parts), pending[0][0].start_line))
        pending.clear()

    pending_words = 0
    for sec in sections:
        units, conv = _section_units(sec, budget, conversation)
        words = sum(u.words for u in units) + (count_words(sec.heading) if pending else 0)
        if words <= budget:
            text = "\n\n".join(u.text for u in units) if not conv else "\n".join(u.text for u in units)
            if pending and pending_words + words > budget:
                flush_pending()
                pending_words = 0
            pending.append((sec, text, words))
            pending_words += words
            continue
        flush_pending()
        pending_words = 0
        overlap = max(1, budget // 5)
        joiner = "\n" if conv else "\n\n"
        windows = _pack_units(units, budget, overlap_words=overlap, joiner=joiner)
        for j, w in enumerate(windows):
            raw.append((sec.heading, sec.level, w.text, sec.start_line if j == 0 else w.line))
    flush_pending()

    out = [Passage(i, h, t.strip("\n"), ln) for i, (h, _lvl, t, ln) in enumerate(raw)]
    if not out:
        out = [Passage(0, "", "", 1)]
    return out


def _first_content_line(body: str) -> int:
    for i, line in enumerate(body.splitlines(), start=1):
        if line.strip():
            return i
    return 1


def embed_text(title: str, passage: Passage | str, date: str | None = None) -> str:
    """The text sent to the embedder: ``title (date)``, then the heading, then the passage text.

    The prefix gives a small window the context it lost by being cut out of its note (DESIGN:
    "~200-token chunks with the note title and date in front"). The heading is skipped when it
    merely repeats the title.
    """
    if isinstance(passage, Passage):
        heading, text = passage.heading, passage.text
    else:
        heading, text = "", passage
    head = (title or "").strip()
    if date:
        head = f"{head} ({date})" if head else str(date)
    parts = [p for p in (head, heading.strip() if heading and heading.strip() != (title or "").strip() else "",
                         text.strip()) if p]
    return "\n".join(parts)
