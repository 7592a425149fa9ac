"""Markdown notes with YAML frontmatter: parse leniently, rewrite faithfully, name files safely.

A note that cannot be parsed (broken YAML, binary, not UTF-8, too large) is never rewritten: readers
get a ``Note`` with ``problem`` set (or a ``NoteError``) and ``hive-brain doctor`` lists it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import NoteError
from . import flatyaml
from .fsutil import sha256_bytes
from .ids import _CROCKFORD
from .ids import new_ulid as new_ulid  # re-exported: callers import ids from here
from .ids import now_iso as now_iso

try:  # the C loader is ~10x faster; fall back silently where libyaml is missing
    _Loader: Any = yaml.CSafeLoader
    _BaseDumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader
    _BaseDumper = yaml.SafeDumper


class _Dumper(_BaseDumper):
    """PyYAML writes a datetime as ``2026-12-04 10:30:00``; Obsidian's Properties read a "Date & time"
    only in the ISO form with a ``T`` (and no zone suffix, which would make it text)."""


def _represent_datetime(dumper: Any, v: dt.datetime) -> Any:
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp", v.isoformat())


_Dumper.add_representer(dt.datetime, _represent_datetime)

# Frontmatter keys that hold a time hive-brain writes or compares. Written as Obsidian dates:
# unquoted ``2026-12-04`` (a Date) or ``2026-12-04T10:30:00`` (a Date & time), always in UTC;
# read back, whatever form they were written in, as one string (:func:`normal_date`).
DATE_KEYS = frozenset({"created", "updated", "date", "ended", "decided_at", "applied_at"})

# Frontmatter keys written in this order; unknown keys follow in their original order.
KEY_ORDER = (
    "id", "type", "title", "memory_key", "layer", "agent", "task", "project", "tags", "aliases", "questions",
    "confidence", "status", "supersedes", "superseded_by", "overrides", "origin", "created", "updated", "content_hash",
)

# Frontmatter is the text between an opening "---" line and the first line that is exactly "---"
# (trailing blanks allowed), less the newline before it: what the single lazy regex
# r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)" (re.S | re.M) matched.  That regex
# retried the closing pattern at every character: 17% of a note's parse time (benchmarks/notes_parse.py);
# jumping between "\n---" candidates with str.find gives the same split (tests/test_notes.py fuzzes it).
_OPEN_RE = re.compile(r"---[ \t]*\r?\n")
_CLOSE_RE = re.compile(r"---[ \t]*(?:\r?\n|\Z)")


def split_frontmatter(text: str) -> tuple[str, int] | None:
    """(frontmatter, offset where the body starts), or None when no closed frontmatter opens the text."""
    m = _OPEN_RE.match(text)
    if m is None:
        return None
    start = line = m.end()
    while True:
        if text.startswith("---", line) and (close := _CLOSE_RE.match(text, line)) is not None:
            end = line
            if line > start:  # the newline ending the last frontmatter line is not part of it
                end = line - 2 if line - 2 >= start and text[line - 2] == "\r" else line - 1
            return text[start:end], close.end()
        nl = text.find("\n---", line)
        if nl < 0:
            return None
        line = nl + 1


@dataclass
class Note:
    path: str  # vault-relative, posix
    meta: dict[str, Any]
    body: str
    raw_sha256: str  # hash of the file's bytes
    problem: str | None = None  # set when frontmatter could not be parsed; meta is then {}
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        t = self.meta.get("title")
        if isinstance(t, str) and t.strip():
            return t.strip()
        base = self.path.rsplit("/", 1)[-1]
        return base[:-3] if base.endswith(".md") else base

    @property
    def id(self) -> str | None:
        v = self.meta.get("id")
        return str(v) if v else None


def written_id(meta: dict[str, Any]) -> str:
    """The id a note's frontmatter gives, or "" when it gives none: missing, empty, or a template
    placeholder left unfilled (``{{...}}`` from Obsidian's Templates, ``<% ... %>`` from Templater)."""
    v = meta.get("id")
    text = "" if v is None or isinstance(v, dict | list) else str(v).strip()
    return "" if not text or "{{" in text or "<%" in text else text


def path_id(path: str) -> str:
    """The id of a typed memory whose frontmatter gives none (a note made from the vault's memory
    template): derived from its vault path, so every device reaches the same id from the notes alone;
    written into the note the first time hive-brain rewrites it, and stable from then on."""
    return derived_memory_id("hive-brain/path-id/" + path)


def derived_memory_id(seed: str) -> str:
    """A memory id every device derives alike from the same ``seed`` (what the notes say)."""
    import hashlib

    n = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:17], "big")
    return "mem-" + "".join(_CROCKFORD[(n >> (5 * i)) & 31] for i in range(26)).lower()


def note_id(path: str, meta: dict[str, Any], kind: str) -> str:
    """A note's id as every reader sees it: the written one, else (typed memories only) :func:`path_id`."""
    return written_id(meta) or (path_id(path) if kind == "memory" else "")


def new_memory_id() -> str:
    return "mem-" + new_ulid().lower()


def content_hash(text: str) -> str:
    """Hash of normalised content: duplicates differ only in whitespace/case of surrounding space."""
    norm = " ".join(unicodedata.normalize("NFKC", text).split())
    return sha256_bytes(norm.encode("utf-8"))


def parse_bytes(path: str, data: bytes, *, max_bytes: int | None = None, scrub: bool = False) -> Note:
    """Parse a note. Raises NoteError for content that is not a text note at all.

    ``scrub``: redact secrets before parsing (``store.secrets.scrub``) for anything derived from the
    note (catalog, index); ``raw_sha256`` stays the hash of the bytes on disk."""
    if max_bytes is not None and len(data) > max_bytes:
        # Only max_bytes + 1 bytes are read of a large file, so say "over", not a size.
        raise NoteError(path, f"is over the {max_bytes:,}-byte limit for a note", hint="split the note")
    if b"\x00" in data[:8192]:
        raise NoteError(path, "is a binary file, not a Markdown note", hint="move it out of the vault or rename it")
    encoding = "utf-8"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Older editors (and Windows tools) save Latin-1 / CP-1252: read it rather than leave the note
        # unsearchable. Never rewritten in another encoding (MemoryStore.load refuses to).
        encoding = "cp1252"
        try:
            text = data.decode("cp1252")
        except UnicodeDecodeError:  # the five bytes CP-1252 leaves undefined: Latin-1 maps every byte
            text, encoding = data.decode("latin-1"), "latin-1"
    if text.startswith("\ufeff"):
        text = text[1:]
    if not scrub:
        note = parse_text(path, text, sha256_bytes(data))
        note.extra["encoding"] = encoding
        return note
    from .secrets import scrub_report

    clean, found = scrub_report(text, path=path)
    note = parse_text(path, clean, sha256_bytes(data))
    note.extra["encoding"] = encoding
    # What doctor lists (line and kind, never the value), and whether the bytes differ from the note's.
    note.extra["secrets"] = found
    note.extra["scrubbed"] = clean is not text
    return note


def parse_text(path: str, text: str, raw_sha: str | None = None) -> Note:
    raw_sha = raw_sha or sha256_bytes(text.encode("utf-8"))
    if not text.startswith("---"):
        return Note(path, {}, text, raw_sha)
    split = split_frontmatter(text)
    if split is None:
        return Note(path, {}, text, raw_sha, problem="frontmatter is not closed by a '---' line")
    fm, body_at = split
    # The simple form (what hive-brain writes) without PyYAML's Python constructor, a third of a
    # rebuild's CPU; bounded by construction, so it needs none of the hostile-input checks below.
    meta = flatyaml.load(fm)
    if meta is None:
        try:
            meta = yaml.load(fm, Loader=_Loader) or {}
        except yaml.YAMLError as e:
            first = str(e).splitlines()[0] if str(e) else "invalid YAML"
            return Note(path, {}, text, raw_sha, problem=f"broken YAML frontmatter: {first}")
        except RecursionError:
            return Note(path, {}, text, raw_sha, problem="YAML frontmatter nested too deeply")
        except (ValueError, OverflowError) as e:
            # The constructor's own errors: an impossible date (2024-02-30), an integer of 5,000 digits.
            return Note(path, {}, text, raw_sha, problem=f"broken YAML frontmatter: {e}")
        hostile = _hostile(meta)
        if hostile:
            return Note(path, {}, text, raw_sha, problem=f"YAML frontmatter {hostile}")
        if not isinstance(meta, dict):
            return Note(path, {}, text, raw_sha, problem="frontmatter is not a key/value mapping")
        meta = {str(k): v for k, v in meta.items()}
    meta = _read_form(meta)
    note = Note(path, meta, text[body_at:], raw_sha)
    note.extra["frontmatter"] = fm  # the user's own text: a rewrite keeps what it does not change
    return note


MAX_FM_DEPTH = 32
MAX_FM_NODES = 20_000  # counted with every repeat of an alias: an alias bomb is caught, not expanded
MAX_FM_SCALAR = 100_000


def _hostile(meta: Any) -> str | None:
    """What makes frontmatter unusable by every later step (which walk it recursively): a value that
    contains itself (``tags: &a [*a]``), nesting deeper than any note needs, an alias bomb, a huge
    scalar. Such a note is reported by doctor and skipped, like broken YAML (issue 28)."""
    budget = [MAX_FM_NODES]
    stack: list[tuple[Any, int, frozenset[int]]] = [(meta, 0, frozenset())]
    while stack:
        v, depth, above = stack.pop()
        budget[0] -= 1
        if budget[0] < 0:
            return f"has more than {MAX_FM_NODES:,} values (aliases counted each time they are used)"
        if isinstance(v, str | bytes):
            if len(v) > MAX_FM_SCALAR:
                return f"holds a value over {MAX_FM_SCALAR:,} characters"
            continue
        if isinstance(v, dict | list | tuple | set):
            if id(v) in above:
                return "holds a value that contains itself (a self-referencing alias)"
            if depth >= MAX_FM_DEPTH:
                return f"is nested deeper than {MAX_FM_DEPTH} levels"
            inner = above | {id(v)}
            items = [x for kv in v.items() for x in kv] if isinstance(v, dict) else list(v)
            stack.extend((x, depth + 1, inner) for x in items)
    return None


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def normal_date(v: Any) -> Any:
    """A time as every reader compares it: ``2026-12-04T10:30:00Z`` (UTC, to the second or finer) or
    ``2026-12-04`` (a day), from a YAML date or datetime, an ISO string with ``Z`` or an offset (the
    quoted form hive-brain wrote before it wrote Obsidian dates), or the unquoted Obsidian form, which
    carries no zone and is read as UTC (what hive-brain writes there). Anything else is left as it is."""
    if isinstance(v, dt.datetime):
        d = v
    elif isinstance(v, dt.date):
        return v.isoformat()
    elif isinstance(v, str) and len(v) >= 10 and v[:4].isdigit() and v[4:5] == "-":
        s = v.strip()
        if len(s) == 10:
            try:
                return dt.date.fromisoformat(s).isoformat()
            except ValueError:
                return v
        try:
            d = dt.datetime.fromisoformat(s[:-1] + "+00:00" if s[-1:] in "Zz" else s)
        except ValueError:
            return v
    else:
        return v
    if d.tzinfo is not None:
        d = d.astimezone(dt.UTC).replace(tzinfo=None)
    return d.isoformat() + "Z"


# Frontmatter keys that link one memory (version) to another: the chain's, a private override's
# shared memory, a sync conflict's head. Written as Obsidian wikilinks to the other note, so Obsidian's
# graph and backlinks show them; read as the linked id (a bare id, as older versions wrote, too).
LINK_KEYS = frozenset({"supersedes", "superseded_by", "rolled_up_into", "overrides", "conflict_of"})
_LINK_RE = re.compile(r"\[\[([^\[\]|#^]+)(?:#[^\[\]|]*)?(?:\|([^\[\]|]*))?\]\]")


def wikilink(path: str, memory_id: str) -> str:
    """``[[Memory/.../note-file|mem-...]]``: a link Obsidian follows to the note at ``path`` (its full
    vault path, so two notes of one name cannot be confused), shown as the id, which hive-brain reads
    back without looking the note up, so the chain holds even after the file is renamed outside
    Obsidian. A path a wikilink cannot hold (``|``, ``#``, brackets) gets the bare id."""
    target = path.removesuffix(".md")
    if not memory_id or any(c in target for c in "[]|#^") or any(c in memory_id for c in "[]|"):
        return memory_id
    return f"[[{target}|{memory_id}]]"


def link_parts(v: Any) -> tuple[str, str] | None:
    """(target, shown text) of a value that is one wikilink, else None."""
    m = _LINK_RE.fullmatch(v.strip()) if isinstance(v, str) else None
    return (m.group(1).strip(), (m.group(2) or "").strip()) if m else None


def linked_id(v: Any) -> Any:
    """The id a link key names: a bare id as it is (how hive-brain wrote it before), a wikilink's shown
    text when it has one (:func:`wikilink`). A wikilink without one (written by hand, ``[[note]]``)
    is left as it is: only the catalog, which knows every note's path, can resolve it
    (``Catalog.resolve_links``)."""
    parts = link_parts(v)
    if parts is None:
        return v
    return parts[1] if parts[1] and not any(c.isspace() for c in parts[1]) else v.strip()


def _read_form(meta: dict[str, Any]) -> dict[str, Any]:
    """Times under :data:`DATE_KEYS` as :func:`normal_date` strings, so that sorting and comparing them
    as text works for every form a vault holds (YAML turns the unquoted ones into date objects); links
    under :data:`LINK_KEYS` as the ids they name (:func:`linked_id`)."""
    for k in DATE_KEYS & meta.keys():
        meta[k] = normal_date(meta[k])
    for k in LINK_KEYS & meta.keys():
        meta[k] = linked_id(meta[k])
    return meta


def _written_form(meta: dict[str, Any]) -> dict[str, Any]:
    """Times under :data:`DATE_KEYS` as the YAML date / datetime Obsidian types as a Date or a Date &
    time: the UTC wall-clock time without a suffix (a ``Z`` or an offset would make Obsidian see text)."""
    out = dict(meta)
    for k in DATE_KEYS & out.keys():
        v = normal_date(out[k])
        if isinstance(v, str) and v.endswith("Z") and len(v) > 10:
            out[k] = dt.datetime.fromisoformat(v[:-1])
        elif isinstance(v, str) and len(v) == 10 and v[4:5] == "-":
            out[k] = dt.date.fromisoformat(v)
    return out


def _dump(meta: dict[str, Any]) -> str:
    return yaml.dump(_plain(_written_form(meta)), Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=1000)


def _ordered(meta: dict[str, Any]) -> dict[str, Any]:
    ordered: dict[str, Any] = {k: meta[k] for k in KEY_ORDER if k in meta and meta[k] is not None}
    for k, v in meta.items():
        if k not in ordered and v is not None:
            ordered[k] = v
    return ordered


def render(meta: dict[str, Any], body: str, *, like: Note | None = None) -> str:
    """A note's text. ``like``: the note being rewritten; its frontmatter text is kept line for line
    where ``meta`` does not change it (the user's comments, key order and quoting), changed keys are
    re-rendered in place, new ones appended. Anything the patch cannot reproduce exactly (checked by
    parsing it back) is rendered whole instead."""
    body = body if body.endswith("\n") else body + "\n"
    fm = None
    if like is not None and isinstance(like.extra.get("frontmatter"), str):
        fm = _patched(like.extra["frontmatter"], like.meta, meta)
    if fm is None:
        fm = _dump(_ordered(meta))
    return f"---\n{fm}---\n\n{body.lstrip(chr(10))}"


# A top-level key at the start of a line: plain, or quoted as YAML allows.
_TOP_KEY = re.compile(r"""(?:"([^"]+)"|'([^']+)'|([^\s#:'"\-?&*!|>%@`{}\[\],][^:]*?))[ \t]*:(?:[ \t]|$)""")


def _blocks(fm: str) -> list[tuple[str | None, list[str]]]:
    """The frontmatter as (key, lines): each top-level key with its continuation lines (indented, or
    a block list's ``- item`` lines); comments and blank lines between keys are blocks of their own."""
    blocks: list[tuple[str | None, list[str]]] = []
    for line in fm.split("\n"):
        m = _TOP_KEY.match(line) if line[:1] not in ("", " ", "\t", "#", "-") else None
        if m is not None:
            blocks.append((m.group(1) or m.group(2) or m.group(3).strip(), [line]))
        elif blocks and blocks[-1][0] is not None and line[:1] in (" ", "\t", "-"):
            blocks[-1][1].append(line)
        else:
            blocks.append((None, [line]))
    return blocks


def _patched(fm: str, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    want = {k: v for k, v in new.items() if v is not None}
    out: list[str] = []
    seen: set[str] = set()
    for key, lines in _blocks(fm):
        if key is None:
            out.extend(lines)
            continue
        if key in seen:
            return None  # a duplicate key: YAML keeps the last; not worth guessing, render whole
        seen.add(key)
        if key not in want:
            continue
        if key in old and old[key] == want[key]:
            out.extend(lines)
        else:
            out.extend(_dump({key: want[key]}).rstrip("\n").split("\n"))
    added = {k: v for k, v in _ordered(want).items() if k not in seen}
    if added:
        while out and not out[-1].strip():
            out.pop()  # new keys go right after the last line that says something
        out.extend(_dump(added).rstrip("\n").split("\n"))
    text = "\n".join(out) + "\n"
    try:
        back = yaml.load(text, Loader=_Loader) or {}
    except yaml.YAMLError:
        return None
    if not isinstance(back, dict):
        return None
    return text if _read_form({str(k): v for k, v in back.items()}) == _read_form(_plain(want)) else None


def to_text_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [x.strip() for x in v.split(",") if x.strip()]
    if isinstance(v, list | tuple | set):
        return [str(x).strip() for x in v if str(x).strip()]
    return [str(v)]


# An Obsidian inline tag: "#" after a space or line start, then a word that is not all digits
# ("#k8s", "#infra/db"; not "#1", not a "# Heading", not a URL fragment "page#part").
# The "#" comes first, the look-behind after it, so the regex engine jumps from "#" to "#".
_INLINE_TAG_RE = re.compile(r"#(?<![\w&/#]#)((?:[^\W\d_]|\d+[^\W\d_])[\w/-]*)")
_CODE_RE = re.compile(r"^ {0,3}(?:`{3,}|~{3,}).*?^ {0,3}(?:`{3,}|~{3,})[ \t]*$|`[^`\n]*`", re.S | re.M)


def inline_tags(body: str) -> list[str]:
    """The ``#tags`` written in a note's text (outside code), first occurrence order."""
    if "#" not in body:
        return []
    if "`" in body or "~" in body:  # no code span or fence without one of them
        body = _CODE_RE.sub(" ", body)
    return list(dict.fromkeys(m.group(1) for m in _INLINE_TAG_RE.finditer(body)))


def note_tags(meta: dict[str, Any], body: str) -> list[str]:
    """Frontmatter ``tags`` and inline ``#tags``: both are the note's tags (Obsidian counts both)."""
    tags = to_text_list(meta.get("tags"))
    seen = {t.lower().lstrip("#") for t in tags}
    return tags + [t for t in inline_tags(body) if t.lower() not in seen]


_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


def slugify(title: str, max_len: int = 60) -> str:
    """A readable file-name stem that cannot name another folder or a device."""
    t = unicodedata.normalize("NFKC", title).lower()
    t = re.sub(r"[^\w\s-]", " ", t)  # drops / \ . : * ? " < > | and emoji
    t = re.sub(r"[\s_-]+", "-", t).strip("-")
    while len(t.encode("utf-8")) > max_len * 2 or len(t) > max_len:
        t = t[:-1]
    t = t.strip("-")
    if not t or t.split(".")[0] in _RESERVED:
        t = f"memory-{t}" if t else "memory"
    return t


def memory_filename(title: str, memory_id: str) -> str:
    short = memory_id.rsplit("-", 1)[-1][-6:].lower()
    return f"{slugify(title)}-{short}.md"


def derive_memory_key(mem_type: str, title: str, project: str | None = None) -> str:
    parts = [slugify(mem_type, 20)]
    if project:
        parts.append(slugify(project, 30))
    parts.append(slugify(title, 60))
    return "/".join(parts)


def read_bytes(abs_path: str | os.PathLike, rel: str, *, max_bytes: int | None = None) -> bytes:
    """A note's bytes (at most ``max_bytes + 1``: enough for :func:`parse_bytes` to say it is too large)."""
    try:
        with open(abs_path, "rb") as f:
            return f.read() if max_bytes is None else f.read(max_bytes + 1)
    except OSError as e:
        raise NoteError(rel, f"cannot be read: {e.strerror}") from e


def read_note(abs_path: str | os.PathLike, rel: str, *, max_bytes: int | None = None, scrub: bool = False) -> Note:
    return parse_bytes(rel, read_bytes(abs_path, rel, max_bytes=max_bytes), max_bytes=max_bytes, scrub=scrub)


def date_of(v: Any) -> dt.datetime | None:
    """Best-effort datetime (UTC) from a frontmatter value."""
    if v is None or v == "":
        return None
    if isinstance(v, dt.datetime):
        return v if v.tzinfo else v.replace(tzinfo=dt.UTC)
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day, tzinfo=dt.UTC)
    s = str(v).strip().replace("Z", "+00:00")
    try:
        d = dt.datetime.fromisoformat(s)
    except ValueError:
        try:
            d = dt.datetime.fromisoformat(s[:10])
        except ValueError:
            return None
    return d if d.tzinfo else d.replace(tzinfo=dt.UTC)
