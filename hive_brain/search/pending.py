"""Whether notes written but not yet indexed could change a question's hits.

A write through the server is answered once its notes are durable; their index (a tantivy commit and
the generation's fsyncs, 60-250 ms at 10k notes on a loaded machine) follows. A recall that comes
meanwhile waits for it only when the hits could differ: one of those notes shares a searched term
with the question (as the next catch-up will index it, or as the index holds it now), or the question
finds notes by other means than their words (a time window or cutoff, a misspelling the index would
correct towards a new word, the vectors holding an older version). Otherwise no written note can be
a candidate before or after, and the answer is the one the index would give with them, up to their
share of the collection statistics (document count and average length in BM25).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..index.predicates import In
from ..index.textproc import query_terms
from . import spelling
from .query import analyse

if TYPE_CHECKING:
    from ..index.lexical import LexicalIndex


def could_change(lexical: LexicalIndex, texts: Iterable[str], written: set[str], paths: list[str], *, vectors: bool,
                 now: Any = None, as_of: str | None = None) -> bool:
    """``texts``: the question and any alternatives the caller sent; ``written``: the terms of
    ``paths`` as they will be indexed (``index.indexer.written_terms``); ``vectors``: the read
    searches vectors too."""
    where = In("note_path", tuple(paths))
    terms: set[str] = set()
    for text in texts:
        # A word the vault lacks is read as its nearest spelling in the index: a written note may hold it.
        if any(spelling.could_respell(lexical, w, t, written, where) for w, t in spelling.unknown_words(lexical, text)):
            return True
        for asked in dict.fromkeys((text, spelling.correct(lexical, text)[0])):  # as typed, as searched
            q = analyse(asked, now=now, as_of=as_of)
            if q.window is not None or q.cutoff is not None:
                return True  # notes dated in the window are candidates whatever their words
            terms |= set(query_terms(asked))
    if not terms or terms & written:
        return True
    # The versions indexed now: one that shares a term is a candidate that must give way to the new one.
    # The vectors of an indexed note go at the catch-up; a new note has none before or after it.
    old = lexical.search_terms(sorted(terms), where=where, limit=1, max_terms=len(terms))
    return bool(old) or vectors and any(lexical.note_passages(p) for p in paths)
