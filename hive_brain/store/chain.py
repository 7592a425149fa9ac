"""Evolution chains: memories linked by ``supersedes`` (to the older version) and ``superseded_by``
(to the newer one). The one walk over those links, with the cycle guard a hand-edited vault needs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from .catalog import Entry

Link = Literal["supersedes", "superseded_by"]


class _ById(Protocol):
    def by_id(self, memory_id: str) -> Entry | None: ...


def walk(catalog: _ById, entry: Entry, link: Link) -> Iterator[Entry]:
    """The entries reached from ``entry`` by following ``link``, nearest first (``entry`` itself not
    included). Stops at a missing id or at an entry already seen: a loop written by hand ends the
    walk instead of hanging it. Forward, it follows the catalog's derived ``next_id``: a version
    restored by a sync still leads to the note that superseded it."""
    seen = {entry.id}
    cur = entry
    while nxt_id := (cur.next_id or cur.meta.get(link) if link == "superseded_by" else cur.meta.get(link)):
        nxt = catalog.by_id(str(nxt_id))
        if nxt is None or nxt.id in seen:
            return
        seen.add(nxt.id)
        yield nxt
        cur = nxt


def versions(catalog: _ById, entry: Entry) -> list[Entry]:
    """The whole chain ``entry`` belongs to, oldest first."""
    return [*reversed(list(walk(catalog, entry, "supersedes"))), entry, *walk(catalog, entry, "superseded_by")]
