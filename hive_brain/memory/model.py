"""The input record of a typed memory (what `remember`, `batch` and Brain Review hand the store)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import InvalidText, UsageError
from ..store.notes import to_text_list

# The one rule for text a caller hands hive-brain to store (titles, content, tags, keys, names):
# tab, LF and CR are text; every other control character (C0, DEL, C1) and every lone surrogate is
# refused, never stripped. NUL turns the note into what the vault reader classes as a binary file
# (nothing could open or delete it again), escape sequences rewrite the terminal that shows the
# note, and a lone surrogate (what invalid UTF-8 in argv or a "\ud800" escape in JSON becomes)
# cannot be written as UTF-8 at all. Refused rather than stripped because the note is the truth:
# silently storing other text than the caller sent would also hash (and deduplicate) other text,
# and the caller, told exactly where, can fix it. Questions are answered instead (clean_query).
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_QUERY_NOISE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: str, what: str) -> str:
    """``value`` unchanged, or :class:`InvalidText` naming the field, the character and where."""
    m = _NOT_TEXT.search(value)
    if m is None:
        return value
    ch = m.group()
    if "\ud800" <= ch <= "\udfff":
        raise InvalidText(f"{what} contains a lone surrogate U+{ord(ch):04X} (invalid UTF-8) at character "
                          f"{m.start()}; nothing was stored", hint="send valid UTF-8 text")
    raise InvalidText(f"{what} contains the control character U+{ord(ch):04X} at character {m.start()}; "
                      "nothing was stored", hint="remove it (tabs and newlines are fine)")


def clean_query(text: str) -> str:
    """A question is answered whatever it holds: control characters become spaces, lone surrogates
    U+FFFD (they could not reach the index, the output or a log as UTF-8)."""
    return _SURROGATE.sub("\ufffd", _QUERY_NOISE.sub(" ", text))


@dataclass
class MemoryInput:
    type: str
    title: str
    content: str
    memory_key: str | None = None
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    confidence: float | None = None
    scope: str | None = None  # "hive" (shared) | "private" | "task"; None = by caller identity
    task: str | None = None
    overrides: str | None = None
    origin: str | None = None
    # Extra frontmatter recording where a reviewed memory came from (review id, sources); set by
    # Brain Review only, never accepted from a caller's record.
    provenance: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryInput:
        if not isinstance(d, dict):
            raise UsageError("each record must be a JSON object")
        unknown = set(d) - (set(cls.__dataclass_fields__) - {"provenance"}) - {"memory_scope"}
        if unknown:
            raise UsageError(f"unknown field(s): {', '.join(sorted(unknown))}")
        d = dict(d)
        if "memory_scope" in d:
            d["scope"] = d.pop("memory_scope")
        d["tags"] = to_text_list(d.get("tags"))
        d["aliases"] = to_text_list(d.get("aliases"))
        for req in ("type", "title", "content"):
            if not isinstance(d.get(req), str):
                raise UsageError(f"field {req!r} is required and must be a string")
        for opt in ("memory_key", "project", "scope", "task", "overrides", "origin"):
            if d.get(opt) is not None and not isinstance(d[opt], str):
                raise UsageError(f"field {opt!r} must be a string")
        return cls(**d)

    def check(self) -> None:
        """Every text field under the one rule (:func:`check_text`)."""
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, str):
                check_text(v, "the " + f.name.replace("_", " "))
            elif isinstance(v, list):
                for x in v:
                    check_text(str(x), f"a value in {f.name}")


def clean_confidence(c: Any) -> float | None:
    if c is None:
        return None
    try:
        v = float(c)
    except (TypeError, ValueError) as e:
        raise UsageError(f"confidence must be a number between 0 and 1, not {c!r}") from e
    if not 0.0 <= v <= 1.0:
        raise UsageError(f"confidence must be between 0 and 1, not {v}")
    return v
