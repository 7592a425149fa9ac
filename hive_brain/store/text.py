"""The one rule for text: what hive-brain stores as said, refuses, or cleans.

Standard library only (the prompt hook cleans its input with it).
"""

from __future__ import annotations

import re

from ..errors import InvalidText

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook's process imports this module
if TYPE_CHECKING:
    from typing import Any

# The one rule for text a caller hands hive-brain to store (titles, content, tags, keys, names):
# tab, LF and CR are text; every other control character (C0, DEL, C1) and every lone surrogate is
# refused, never stripped. NUL turns the note into what the vault reader classes as a binary file
# (nothing could open or delete it again), escape sequences rewrite the terminal that shows the
# note, and a lone surrogate (what invalid UTF-8 in argv or a "\ud800" escape in JSON becomes)
# cannot be written as UTF-8 at all. Refused rather than stripped because the note is the truth:
# silently storing other text than the caller sent would also hash (and deduplicate) other text,
# and the caller, told exactly where, can fix it. Questions and captured transcripts are cleaned
# instead (clean_text).
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


def clean_text(text: str) -> str:
    """Text hive-brain answers or captures rather than stores as said (a question, a request's op, a
    captured transcript): control characters become spaces, lone surrogates U+FFFD (they could not
    reach the index, a note, the output or a log as UTF-8)."""
    return _SURROGATE.sub("\ufffd", _QUERY_NOISE.sub(" ", text))


def clean_json(obj: Any) -> Any:
    """``obj`` (parsed JSON) with every string, keys included, passed through :func:`clean_text`."""
    if isinstance(obj, str):
        return clean_text(obj)
    if isinstance(obj, list):
        return [clean_json(x) for x in obj]
    if isinstance(obj, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_json(v) for k, v in obj.items()}
    return obj
