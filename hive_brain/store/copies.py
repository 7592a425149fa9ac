"""The names sync tools give to copies of a note, and git conflict markers inside one.

Sync carries notes between devices, and when two devices change one note each tool keeps both under
a name of its own. These names are how a copy is told from the note it copies (the catalog prefers
the original as the head of a memory id; `doctor` and `repair-conflicts` report the copies):

* Syncthing: ``note.sync-conflict-20261130-101010-ABCDEFG.md``
* Dropbox: ``note (Jane's conflicted copy 2026-11-30).md``; Obsidian Sync (when it keeps a conflict
  file): ``note (Conflicted copy DEVICE 202611301010).md`` — one pattern, "conflicted copy"
* Obsidian "Make a copy", iCloud, Google Drive: ``note 1.md``, ``note 2.md``, ``note (1).md`` — a
  number alone is also an ordinary title ("Sprint 2"), so these count only when the original exists
"""

from __future__ import annotations

import re

_SYNCTHING = re.compile(r"\.sync-conflict-\d{8}-\d{6}-[A-Z0-9]{7}(?=\.md$)")
_CONFLICTED = re.compile(r" \([^()]*conflicted copy[^()]*\)(?=\.md$)", re.I)
_NUMBERED = re.compile(r"(?: \d{1,2}| \(\d{1,2}\))(?=\.md$)")
# Git writes these at the start of a line; "=======" alone is also a Markdown heading underline,
# so a note counts only when an opening and a closing marker are both there.
_GIT_OPEN = re.compile(r"^<{7} \S", re.M)
_GIT_CLOSE = re.compile(r"^>{7} \S", re.M)


def copy_kind(path: str) -> str | None:
    """``syncthing``, ``conflicted-copy`` or ``numbered-copy`` when the file name is one a sync tool
    gives a copy (a numbered copy only counts when :func:`original_of` exists), else None."""
    name = path.rsplit("/", 1)[-1]
    if _SYNCTHING.search(name):
        return "syncthing"
    if _CONFLICTED.search(name):
        return "conflicted-copy"
    if _NUMBERED.search(name):
        return "numbered-copy"
    return None


def original_of(path: str) -> str | None:
    """The path of the note a copy was made from (the copy suffix removed), or None."""
    folder, _, name = path.rpartition("/")
    for pattern in (_SYNCTHING, _CONFLICTED, _NUMBERED):
        stripped, n = pattern.subn("", name, count=1)
        if n:
            return f"{folder}/{stripped}" if folder else stripped
    return None


def has_git_markers(text: str) -> bool:
    """True when a note holds an unresolved git merge (``<<<<<<< ours`` ... ``>>>>>>> theirs``)."""
    # The substring tests first: a line-anchored search visits every line, and it runs twice per note indexed.
    return "<<<<<<< " in text and ">>>>>>> " in text and bool(_GIT_OPEN.search(text) and _GIT_CLOSE.search(text))


_GIT_LINE = re.compile(r"^(?:<{7}|\|{7}|>{7})(?: .*)?$|^={7}$")


def without_git_markers(text: str) -> str:
    """``text`` with the marker lines of each unresolved merge blanked (both sides' lines kept, so
    neither device's edit is lost to search; blank, not removed, so line numbers still point into the
    note). A ``=======`` outside a merge is a heading underline and stays."""
    if not has_git_markers(text):
        return text
    lines = text.split("\n")
    depth = 0
    for i, line in enumerate(lines):
        if line.startswith("<<<<<<<") and _GIT_LINE.match(line):
            depth += 1
        elif depth and _GIT_LINE.match(line):
            if line.startswith(">>>>>>>"):
                depth -= 1
        else:
            continue
        lines[i] = ""
    return "\n".join(lines)
