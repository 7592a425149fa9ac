"""The frontmatter hive-brain writes, read without PyYAML (issue 30).

PyYAML's C loader scans in C but builds every value in Python (its constructor and resolver): a
third of a lexical rebuild's CPU went there. Almost every note's frontmatter is in the form
hive-brain's own dumper writes, which most hand-written frontmatter is too: flat ``key: value``
lines, block lists of scalars (``tags:`` then ``- a`` lines, indented or not), ``[a, b]`` lists of
words, plain words, quoted strings, integers, decimals, ``YYYY-MM-DD`` dates and ``YYYY-MM-DDTHH:MM:SS``
times (the Obsidian form notes are written in), ``yes``/``no``/``null``.
:func:`load` reads exactly that form and returns ``None`` for anything else (a comment, a nested
mapping, an anchor, a tab, a multi-line or escaped string, an ambiguous scalar such as ``012`` or
``1.5e+3``), which the caller then gives to PyYAML: the fast path never has to know YAML's corner
cases, only recognise the lines that have none. Whatever it returns equals what
``yaml.load(text, Loader=CSafeLoader)`` returns, types included (tests/test_flatyaml.py checks
that on generated frontmatter full of tricky scalars and on the notes hive-brain writes).

What it accepts is bounded by construction (no aliases, two levels, at most :data:`MAX_CHARS`
characters), so none of the hostile-YAML checks in ``notes._hostile`` can be triggered by it.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from yaml.resolver import Resolver

MAX_CHARS = 8192  # longer frontmatter (rare) goes to PyYAML and its hostile-input checks
_MAX_KEY = 128  # YAML refuses an implicit key over 1024 characters; no real key comes close

# Anything YAML treats specially as a character: tabs, CR, controls, DEL and C1 (incl. NEL), the
# Unicode line and paragraph separators, a BOM, the non-characters, lone surrogates.
_UNSAFE = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: +(.*))?")
_ITEM_LINE = re.compile(r"( *)- +(.*)")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
# The time form notes are written in (Obsidian's "Date & time": no fraction, no zone): PyYAML reads it
# as a naive datetime; any other spelling of a time is left to PyYAML.
_DATETIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})")
# How PyYAML decides a plain scalar's type: first character -> [(tag, regexp)], the same table its
# loaders use (``y``/``n`` are no booleans there, ``yes``/``on``/``off`` are).
_RESOLVERS: dict[str | None, list[tuple[str, re.Pattern[str]]]] = Resolver.yaml_implicit_resolvers
_BOOLS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}
_FLOW_UNSAFE = frozenset("[]{}:#\"'&*!|>%@`?,")


class _Unsure(Exception):
    """The text is not in the simple form: PyYAML reads it."""


def load(text: str) -> dict[str, Any] | None:
    """The mapping ``text`` holds, or None when it is not in the simple form (then ask PyYAML)."""
    if len(text) > MAX_CHARS or _UNSAFE.search(text):
        return None
    try:
        return _load(text)
    except (_Unsure, ValueError, OverflowError):  # an impossible date is PyYAML's to report
        return None


def _load(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lines = text.split("\n")
    n = len(lines)
    i = 0
    while i < n:
        line = lines[i]
        i += 1
        if not line:
            continue
        m = _KEY_LINE.fullmatch(line)
        if m is None:
            raise _Unsure
        key, raw = m.group(1), m.group(2)
        if key in out or not _plain_key(key):
            raise _Unsure  # a repeated key, or one YAML reads as true/false/null
        if raw:
            out[key] = _scalar(raw)
            continue
        items: list[Any] = []
        indent = None
        while i < n and lines[i][:1] in (" ", "-"):
            im = _ITEM_LINE.fullmatch(lines[i])
            if im is None or (indent is not None and im.group(1) != indent):
                raise _Unsure
            indent = im.group(1)
            items.append(_scalar(im.group(2)))
            i += 1
        out[key] = items if items else None
    return out


_KEYS: dict[str, bool] = {}  # key -> whether YAML reads it as a string: the same few keys start every note


def _plain_key(key: str) -> bool:
    ok = _KEYS.get(key)
    if ok is None:
        ok = len(key) <= _MAX_KEY and isinstance(_plain(key), str)
        if len(_KEYS) < 10_000:
            _KEYS[key] = ok
    return ok


def _scalar(raw: str) -> Any:
    raw = raw.rstrip(" ")
    if not raw:
        raise _Unsure
    first = raw[0]
    if first == '"':
        inner = raw[1:-1]
        if len(raw) < 2 or raw[-1] != '"' or '"' in inner or "\\" in inner:
            raise _Unsure
        return inner
    if first == "'":
        inner = raw[1:-1]
        if len(raw) < 2 or raw[-1] != "'" or "'" in inner.replace("''", ""):
            raise _Unsure
        return inner.replace("''", "'")
    if first == "[":
        if raw[-1] != "]":
            raise _Unsure
        inner = raw[1:-1]
        if not inner.strip(" "):
            return []
        items = [x.strip(" ") for x in inner.split(",")]
        if any(not x or not _FLOW_UNSAFE.isdisjoint(x) for x in items):
            raise _Unsure
        return [_plain(x) for x in items]
    return _plain(raw)


def _plain(raw: str) -> Any:
    """A plain (unquoted) scalar on one line. Its type is what PyYAML's own resolver says (its regular
    expressions, keyed by the first character); only the simple spellings of each type are built here."""
    first = raw[0]
    if not (first.isalnum() or first == "-" and raw[1:2].isdigit()):
        raise _Unsure  # an indicator (& * ! | > ' " % @ ` [ { # ? - :) or a space
    if ": " in raw or raw[-1] == ":" or " #" in raw:
        raise _Unsure  # a nested mapping, or a comment
    resolvers = _RESOLVERS.get(first)
    tag = None if resolvers is None else next((t for t, regexp in resolvers if regexp.match(raw)), None)
    if tag is None:
        return raw  # no implicit type: a string
    if tag == "tag:yaml.org,2002:bool":
        return _BOOLS[raw.lower()]
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:int" and _INT.fullmatch(raw):
        return int(raw)
    if tag == "tag:yaml.org,2002:float" and _FLOAT.fullmatch(raw):
        return float(raw)
    if tag == "tag:yaml.org,2002:timestamp" and (d := _DATE.fullmatch(raw)) is not None:
        return dt.date(int(d.group(1)), int(d.group(2)), int(d.group(3)))
    if tag == "tag:yaml.org,2002:timestamp" and (d := _DATETIME.fullmatch(raw)) is not None:
        y, mo, dd, h, mi, sec = (int(x) for x in d.groups())
        return dt.datetime(y, mo, dd, h, mi, sec)
    raise _Unsure  # 0x1f, 012, 1_000, 1:20, .inf, 1e+3, a time of day, <<, =: PyYAML builds those
