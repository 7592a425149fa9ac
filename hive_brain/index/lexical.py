"""The tantivy index of passage documents (docs/architecture.md, "Passage document").

Analysis happens in Python (:mod:`hive_brain.textproc`): analyzed fields receive the analyzer's
terms joined by spaces and use tantivy's built-in ``whitespace`` tokenizer, which neither lowercases
nor drops long tokens; queries are built term by term from :func:`textproc.query_terms`. Indexing
and querying therefore share one analyzer by construction, and no query parser ever sees a raw
prompt. The built-in tokenizer is used (not a registered one) because registered analyzers live only
in the process that registered them; any process can open this index and get the same behaviour.

Keyword fields use the ``raw`` tokenizer (one exact term, ``""`` included) and are stored, so a hit
can be turned into its passage document without reading the note. The original ``title``,
``heading`` and ``text`` are stored as bytes (stored, not indexed) because the indexed copies
hold analyzed terms; :meth:`LexicalIndex.get_docs` returns them.

Boundaries (:mod:`hive_brain.predicates`) are compiled into MUST / MUST_NOT clauses of the same
BooleanQuery that scores the terms, wrapped in a zero constant score: they decide *which* passages
may match before tantivy's top-k collector runs and never change *how* a passage scores.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tantivy

from ..errors import IndexError_, LockTimeout
from ..store.fsutil import quarantine
from . import textproc
from .predicates import Pred, to_tantivy

SCHEMA_VERSION = 2
META_FILE = "hive-lexical.json"

KEYWORD_FIELDS: tuple[str, ...] = (
    "unit", "passage_id", "note_path", "note_id", "kind", "type", "layer", "agent", "task", "project", "status",
    "memory_key", "text_hash",
)
TEXT_FIELDS: tuple[str, ...] = ("title", "aliases", "tags", "heading", "text")
INT_FIELDS: tuple[str, ...] = ("date",)
# Stored originals of the analyzed fields (the indexed copies hold analyzer output).
_SOURCE_FIELDS: dict[str, str] = {"title": "title_src", "heading": "heading_src", "text": "text_src"}

DEFAULT_BOOSTS: dict[str, float] = {"title": 2.0, "aliases": 2.0, "tags": 1.5, "heading": 1.2, "text": 1.0}
PLAIN_BOOSTS: dict[str, float] = {"text": 1.0}  # baseline: BM25 on the passage body only
MAX_QUERY_TERMS = 64
WRITER_BUSY_WAIT_S = 10.0  # how long a writer waits for another process's (a server finishing merges)


@dataclass(frozen=True, slots=True)
class LexHit:
    passage_id: str
    note_path: str
    score: float
    # All stored fields (see LexicalIndex.get_docs) when search(..., fetch=True); else None.
    doc: dict[str, Any] | None = field(default=None, compare=False)


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    for name in KEYWORD_FIELDS:
        sb.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    for name in TEXT_FIELDS:
        # Positions only on the body: phrase queries over title/tags are not worth the space.
        sb.add_text_field(name, stored=False, tokenizer_name="whitespace",
                          index_option="position" if name == "text" else "freq")
    for name in _SOURCE_FIELDS.values():
        sb.add_bytes_field(name, stored=True)
    sb.add_text_field("aliases_src", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("tags_src", stored=True, tokenizer_name="raw", index_option="basic")
    for name in INT_FIELDS:
        sb.add_integer_field(name, stored=True, indexed=True, fast=True)
    return sb.build()


def _meta() -> dict[str, Any]:
    # The analyzer fingerprint changes when the installed stemmer stems differently (snowballstemmer
    # 2.x vs 3.x, or PyStemmer's libstemmer): terms indexed by one and queried by the other would
    # silently stop matching, so such an index is treated as incompatible.
    return {"schema_version": SCHEMA_VERSION, "analyzer": textproc.analyzer_fingerprint()}


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v] if v else []
    return [str(x) for x in v if x is not None and str(x)]


class LexicalIndex:
    """Create-or-open the passage index in ``directory`` (a per-device cache, rebuildable).

    An index written with another schema or analyzer version is refused with
    :class:`~hive_brain.errors.IndexError_` unless ``reset_incompatible=True``, which deletes it and
    starts empty (``was_reset`` is then True and the caller must re-index).

    ``read_only=True`` (the prompt hook's handle) never creates, resets or writes anything: a
    missing index reads as an empty one (``exists`` is False) and :meth:`writer` is refused.
    """

    def __init__(self, directory: Path | str, *, reset_incompatible: bool = False, read_only: bool = False) -> None:
        self.directory = Path(directory)
        self.was_reset = False
        self.read_only = read_only
        self.schema = _schema()
        # Weak, so a writer dropped without commit/rollback is collected (its tantivy writer and
        # lock with it) instead of blocking this handle forever.
        self._active_writer: weakref.ref[LexicalWriter] | None = None
        # A long-lived owner (the server) sets ``defer_merges``: a committed writer is kept while tantivy
        # merges segments, and :meth:`finish_merges` waits for it once the caller has answered. Waiting at
        # commit put a 1-2 s merge (every few one-note commits) inside a write the user waits for.
        self.defer_merges = False
        self._merging: tantivy.IndexWriter | None = None
        meta_path = self.directory / META_FILE
        exists = self.directory.is_dir() and (self.directory / "meta.json").exists()
        if exists:
            found = _read_meta(meta_path)
            if found != _meta():
                if not reset_incompatible or read_only:
                    raise IndexError_(
                        f"lexical index at {self.directory} was built by another version ({found})",
                        hint="rebuild the index",
                    )
                shutil.rmtree(self.directory)
                self.was_reset = True
                exists = False
        self.exists = exists
        if read_only and not exists:
            # In memory: searches return nothing, and no file appears under a writer's feet.
            self._index = tantivy.Index(self.schema)
            return
        if not exists:
            # Our meta first: an index whose creation was interrupted after this point is still
            # recognised as ours and recreated (tantivy's meta.json marks it as existing).
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = meta_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(_meta()))
            tmp.replace(meta_path)
        try:
            self._index = tantivy.Index(self.schema, path=str(self.directory), reuse=exists)
        except (OSError, ValueError) as e:
            if not (reset_incompatible and exists):
                raise IndexError_(f"cannot open lexical index at {self.directory}: {e}",
                                  hint="run `hive-brain rebuild-index`") from e
            # Damaged (a segment or tantivy's meta.json): it is a cache, so it is moved aside and
            # the caller re-indexes everything into a new one.
            quarantine(self.directory, str(e))
            self.__init__(directory, reset_incompatible=False)  # type: ignore[misc]  # a fresh, empty index
            self.was_reset = True
            return
        self.exists = True

    def damage(self) -> str | None:
        """What is unreadable in the index (None: every stored document reads back). Reads it all:
        for ``doctor`` and ``rebuild-index``."""
        try:
            searcher = self._index.searcher()
            n = searcher.num_docs
            if n:
                for _s, a in searcher.search(tantivy.Query.all_query(), n, count=False).hits:
                    _doc_dict(searcher.doc(a))
        except (OSError, ValueError, RuntimeError, UnicodeDecodeError) as e:
            return str(e) or type(e).__name__
        return None

    # -- writing -------------------------------------------------------------------------------

    def writer(self, heap_mb: int = 128, *, num_threads: int = 0) -> LexicalWriter:
        """A context manager that commits on clean exit and rolls back on exception.

        Only one writer may exist per index, across processes (tantivy's lock file); a second one in
        this process raises :class:`~hive_brain.errors.LockTimeout` at once, one in another process
        after waiting ``WRITER_BUSY_WAIT_S`` for the first to go.
        """
        if self.read_only:
            raise IndexError_(f"the lexical index at {self.directory} was opened read-only")
        if self._active_writer is not None and self._active_writer() is not None:
            raise LockTimeout(
                f"a lexical index writer is already open on {self.directory} in this process",
                hint="close it before opening another",
            )
        self.finish_merges()
        w = self._open_writer(heap_mb, num_threads)
        # A writer killed inside its commit leaves files meta.json never named (a segment's
        # `<segment>.<opstamp>.del`); the next commit writing that name fails with FileAlreadyExists
        # (found by benchmarks/chaos.py). Holding the writer lock, drop every file no commit names.
        with contextlib.suppress(Exception):
            w.garbage_collect_files()
        lw = LexicalWriter(self, w)
        self._active_writer = weakref.ref(lw)
        return lw

    # -- reading -------------------------------------------------------------------------------

    def _open_writer(self, heap_mb: int, num_threads: int) -> tantivy.IndexWriter:
        # Callers hold the vault lock, so a busy tantivy lock is a server still finishing the merges of
        # its last commit (see ``defer_merges``): they end within seconds, so wait for them a while.
        deadline = time.monotonic() + WRITER_BUSY_WAIT_S
        while True:
            try:
                return self._index.writer(heap_size=heap_mb * 1_000_000, num_threads=num_threads)
            except ValueError as e:
                busy = "LockBusy" in str(e) or "lock" in str(e).lower()
                if busy and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                if busy:
                    raise LockTimeout(
                        f"another writer (in this or another process) holds the lexical index at {self.directory}",
                        hint="only one index writer may run at a time; is `hive-brain serve` running?",
                    ) from e
                raise IndexError_(f"cannot open a writer on {self.directory}: {e}") from e

    def finish_merges(self) -> None:
        """Wait for the merges of the last deferred commit and release its writer (and tantivy's lock)."""
        w, self._merging = self._merging, None
        if w is not None:
            with contextlib.suppress(Exception):
                w.wait_merging_threads()

    def reload(self) -> None:
        """Make the next search see the latest commit (also from another process)."""
        self._index.reload()

    def term_weights(self, terms: Sequence[str]) -> dict[str, float]:
        """IDF-like weight of each analyzed term over passage bodies (rare terms matter more).

        A term no passage contains gets the median weight of the others: it says nothing about
        which note fits, and giving it the highest IDF would make every question with a word the
        vault never uses ("how long does X take") look uncovered.
        """
        searcher = self._index.searcher()
        n = max(1, searcher.num_docs)
        dfs = {t: searcher.doc_freq("text", t) for t in terms}
        known = sorted(math.log(1.0 + n / (1.0 + df)) for df in dfs.values() if df)
        typical = known[len(known) // 2] if known else 1.0
        return {t: math.log(1.0 + n / (1.0 + df)) if df else typical for t, df in dfs.items()}

    def known(self, term: str) -> bool:
        """Whether any passage has ``term`` (an analyzed term) in its text or title."""
        return self.frequency(term) > 0

    def frequency(self, term: str) -> int:
        """How many passages have ``term`` (an analyzed term) in their text, plus in their title."""
        searcher = self._index.searcher()
        return int(searcher.doc_freq("text", term) + searcher.doc_freq("title", term))

    def near_texts(self, term: str, distance: int, limit: int, *, prefix: bool = False,
                   where: Pred | None = None) -> list[str]:
        """The stored titles and texts of up to ``limit`` passages holding a term within ``distance``
        edits of ``term`` (tantivy's Levenshtein automaton over the term dictionary; ``prefix``: of a
        term's beginning): where the vault's spelling of a mistyped word is found. ``where``: only
        among the passages it selects."""
        searcher = self._index.searcher()
        q = tantivy.Query.boolean_query([
            (tantivy.Occur.Should, tantivy.Query.fuzzy_term_query(self.schema, f, term, distance=distance,
                                                                    prefix=prefix))
            for f in ("title", "text")])
        if where is not None:
            q = tantivy.Query.boolean_query([(tantivy.Occur.Must, q), (tantivy.Occur.Must, self.compile(where))])
        out = []
        for _score, addr in searcher.search(q, limit, count=False).hits:
            d = _doc_dict(searcher.doc(addr))
            out.append(f"{d.get('title') or ''} {d.get('text') or ''}")
        return out

    def doc_count(self) -> int:
        return self._index.searcher().num_docs

    def search(
        self,
        query: str,
        *,
        where: Pred | None = None,
        limit: int = 50,
        fields_boost: Mapping[str, float] | None = None,
        fetch: bool = False,
        max_terms: int = MAX_QUERY_TERMS,
    ) -> list[LexHit]:
        """BM25 over the analyzed fields, restricted by ``where`` inside the query.

        ``fields_boost`` maps analyzed fields to boosts (default :data:`DEFAULT_BOOSTS`;
        :data:`PLAIN_BOOSTS` gives a body-only BM25 baseline). A query without terms returns [].
        """
        terms = textproc.query_terms(query)
        return self.search_terms(terms, where=where, limit=limit, fields_boost=fields_boost, fetch=fetch,
                                 max_terms=max_terms)

    def search_plain(self, query: str, *, where: Pred | None = None, limit: int = 50) -> list[LexHit]:
        """Baseline: plain BM25 on the passage body only (same index, same analyzer)."""
        return self.search(query, where=where, limit=limit, fields_boost=PLAIN_BOOSTS)

    def search_terms(
        self,
        terms: Sequence[str],
        *,
        where: Pred | None = None,
        limit: int = 50,
        fields_boost: Mapping[str, float] | None = None,
        fetch: bool = False,
        max_terms: int = MAX_QUERY_TERMS,
    ) -> list[LexHit]:
        """Like :meth:`search` for already analyzed terms (e.g. ``textproc.query_terms`` output)."""
        if not terms or limit <= 0:
            return []
        boosts = DEFAULT_BOOSTS if fields_boost is None else fields_boost
        for f in boosts:
            if f not in TEXT_FIELDS:
                raise ValueError(f"cannot boost {f!r}: not an analyzed field {TEXT_FIELDS}")
        searcher = self._index.searcher()
        terms = list(dict.fromkeys(terms))
        if len(terms) > max_terms:
            terms = self._informative(searcher, terms, max_terms)
        should: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for t in terms:
            for f, b in boosts.items():
                if b <= 0:
                    continue
                q = tantivy.Query.term_query(self.schema, f, t)
                should.append((tantivy.Occur.Should, q if b == 1.0 else tantivy.Query.boost_query(q, b)))
        if not should:
            return []
        q = tantivy.Query.boolean_query(should)
        if where is not None:
            # Zero constant score: the boundary selects passages, it must not reorder them
            # (a term query on a rare agent id would otherwise add its own IDF to the score).
            q = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, q),
                (tantivy.Occur.Must, tantivy.Query.const_score_query(self.compile(where), 0.0)),
            ])
        res = searcher.search(q, limit, count=False)
        out: list[LexHit] = []
        for score, addr in res.hits:
            d = searcher.doc(addr)
            out.append(LexHit(
                d.get_first("passage_id") or "",
                d.get_first("note_path") or "",
                float(score),
                _doc_dict(d) if fetch else None,
            ))
        # Equal scores would come in index order, which differs between devices that indexed the same
        # notes in another order (a sync delivers them at once): the passage id breaks the tie alike.
        out.sort(key=lambda h: (-h.score, h.passage_id))
        return out

    def matching(self, where: Pred, *, limit: int = 50) -> list[LexHit]:
        """Passages matching ``where`` alone, newest first (score 0): the notes of a time window."""
        if limit <= 0:
            return []
        searcher = self._index.searcher()
        res = searcher.search(self.compile(where), limit, count=False, order_by_field="date")
        out = []
        for _key, addr in res.hits:
            d = searcher.doc(addr)
            out.append(LexHit(d.get_first("passage_id") or "", d.get_first("note_path") or "", 0.0))
        return out

    def _informative(self, searcher: tantivy.Searcher, terms: list[str], k: int) -> list[str]:
        """Keep the ``k`` rarest terms that occur at all (a pasted log is mostly noise)."""
        scored = []
        for i, t in enumerate(terms):
            df = searcher.doc_freq("text", t) + searcher.doc_freq("title", t)
            scored.append((df == 0, df, i, t))
        scored.sort()
        keep = {t for *_x, t in scored[:k]}
        return [t for t in terms if t in keep]

    def compile(self, p: Pred) -> tantivy.Query:
        """Compile a boundary predicate to a (non-scoring-relevant) tantivy query."""
        return to_tantivy(p, self.schema, keyword_fields=KEYWORD_FIELDS, int_fields=INT_FIELDS)

    def count(self, where: Pred | None = None) -> int:
        """Number of passages matching ``where`` (all passages when None)."""
        q = tantivy.Query.all_query() if where is None else self.compile(where)
        return self._index.searcher().search(q, 1, count=True).count  # type: ignore[attr-defined]  # count=True sets it; the stub omits it

    def get_docs(self, passage_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """passage_id -> stored fields (keywords, ``date``, original ``title``/``heading``/``text``,
        ``aliases``/``tags`` as lists). Unknown ids are absent."""
        ids = list(dict.fromkeys(passage_ids))
        if not ids:
            return {}
        searcher = self._index.searcher()
        q = tantivy.Query.term_set_query(self.schema, "passage_id", ids)
        res = searcher.search(q, 2 * len(ids), count=False)  # room for accidental duplicates
        out: dict[str, dict[str, Any]] = {}
        for _s, addr in res.hits:
            d = _doc_dict(searcher.doc(addr))
            out[d["passage_id"]] = d
        return out

    def get_texts(self, passage_ids: Iterable[str]) -> dict[str, str]:
        """passage_id -> original passage text."""
        return {pid: d["text"] for pid, d in self.get_docs(passage_ids).items()}

    def note_passages(self, note_path: str) -> list[str]:
        """The passage ids currently indexed for a note (sorted by passage number)."""
        searcher, addrs = self._note_addresses(note_path)
        ids = [searcher.doc(a).get_first("passage_id") for a in addrs]
        return sorted((i for i in ids if i), key=_passage_number)

    def note_docs(self, note_path: str) -> list[dict[str, Any]]:
        """The stored passages of a note (:meth:`get_docs`' fields), sorted by passage number: one search
        where ``get_docs(note_passages(path))`` made three (a term-set lookup of its ids among them, 1.8 ms
        of a 10k recall for the hits' whole texts)."""
        searcher, addrs = self._note_addresses(note_path)
        docs = {d["passage_id"]: d for d in map(_doc_dict, map(searcher.doc, addrs)) if d["passage_id"]}
        return [docs[p] for p in sorted(docs, key=_passage_number)]

    def _note_addresses(self, note_path: str) -> tuple[tantivy.Searcher, list[Any]]:
        searcher = self._index.searcher()
        q = tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.term_query(self.schema, "note_path", note_path, index_option="basic")),
            (tantivy.Occur.MustNot, tantivy.Query.term_query(self.schema, "unit", "note", index_option="basic")),
        ])
        n = searcher.search(q, 1, count=True).count  # type: ignore[attr-defined]  # count=True sets it; the stub omits it
        return searcher, [a for _s, a in searcher.search(q, n, count=False).hits] if n else []


    def note_paths(self) -> set[str]:
        """Every note path with a document in the index (a scan: for crash repair, not per write)."""
        searcher = self._index.searcher()
        n = searcher.num_docs
        if not n:
            return set()
        hits = searcher.search(tantivy.Query.all_query(), n, count=False).hits
        return {p for _s, a in hits if (p := searcher.doc(a).get_first("note_path"))}


def analyzed_fields(doc: Mapping[str, Any]) -> dict[str, str]:
    """What a passage document's searched fields (:data:`TEXT_FIELDS`) hold: analyzed terms joined by
    spaces, as the whitespace tokenizer reads them."""
    out = {}
    for name in ("title", "heading", "text"):
        # A caller that already analyzed the text (a whole-note document built from its
        # passages) passes the terms, so a note is never analyzed twice.
        terms = doc.get(f"{name}_terms")
        analyzed = terms if isinstance(terms, str) else textproc.analyze_joined(str(doc.get(name) or ""))
        if name == "title":
            # An alias is another name of the note: searched like its title. Alone in a field that
            # most notes leave empty, BM25's length normalisation buried it under any body match.
            # The writer's questions are other ways of naming it too (`questions`), searched the same way.
            names = [*_as_list(doc.get("aliases")), *_as_list(doc.get("questions"))]
            analyzed = " ".join([analyzed, *(textproc.analyze_joined(a) for a in names)])
        out[name] = analyzed
    for name in ("aliases", "tags"):
        out[name] = " ".join(textproc.analyze_joined(v) for v in _as_list(doc.get(name)))
    return out


def doc_terms(docs: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every term a search could match in these documents, whatever the field."""
    return {t for d in docs for v in analyzed_fields(d).values() for t in v.split()}


def _passage_number(pid: str) -> int:
    tail = pid.rpartition("#")[2]
    return int(tail) if tail.isdigit() else 0


def _doc_dict(d: tantivy.Document) -> dict[str, Any]:
    out: dict[str, Any] = {name: d.get_first(name) or "" for name in KEYWORD_FIELDS}
    for name, src in _SOURCE_FIELDS.items():
        raw = d.get_first(src)
        out[name] = raw.decode("utf-8") if raw else ""
    out["aliases"] = list(d.get_all("aliases_src"))
    out["tags"] = list(d.get_all("tags_src"))
    out["date"] = d.get_first("date") or 0
    return out


def _read_meta(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class LexicalWriter:
    """Batch of index changes; use as a context manager (see :meth:`LexicalIndex.writer`)."""

    def __init__(self, index: LexicalIndex, writer: tantivy.IndexWriter) -> None:
        self._owner = index
        self._w: tantivy.IndexWriter | None = writer
        self.added = 0

    def __enter__(self) -> LexicalWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def _writer(self) -> tantivy.IndexWriter:
        if self._w is None:
            raise IndexError_("this lexical writer is closed")
        return self._w

    def add(self, doc: Mapping[str, Any]) -> None:
        """Add one passage document (fields as in docs/architecture.md; raw, unanalyzed values).

        ``passage_id`` and ``note_path`` are required; other keyword fields default to "";
        ``aliases``/``tags`` may be a string or a list; ``date`` is unix seconds (default 0).
        """
        w = self._writer()
        if not doc.get("passage_id") or not doc.get("note_path"):
            raise ValueError("a passage document needs passage_id and note_path")
        d = tantivy.Document()
        for name in KEYWORD_FIELDS:
            v = doc.get(name)
            d.add_text(name, "" if v is None else str(v))
        for name, analyzed in analyzed_fields(doc).items():
            d.add_text(name, analyzed)
        for name in ("title", "heading", "text"):
            d.add_bytes(_SOURCE_FIELDS[name], str(doc.get(name) or "").encode("utf-8"))
        for name in ("aliases", "tags"):
            for v in _as_list(doc.get(name)):
                d.add_text(f"{name}_src", v)
        d.add_integer("date", int(doc.get("date") or 0))
        w.add_document(d)
        self.added += 1

    def delete_note(self, note_path: str) -> None:
        """Remove every passage of a note (applies to documents added before this call)."""
        self._writer().delete_documents_by_term("note_path", note_path)

    def delete_passage(self, passage_id: str) -> None:
        self._writer().delete_documents_by_term("passage_id", passage_id)

    def delete_all(self) -> None:
        self._writer().delete_all_documents()

    def commit(self) -> None:
        """Publish the batch, then release the writer (and its lock) deterministically."""
        w = self._writer()
        try:
            w.commit()
        except BaseException:
            self.rollback()
            raise
        self._close(w)
        self._owner.reload()

    def rollback(self) -> None:
        """Discard everything since the last commit and release the writer.

        Explicit rather than relying on the writer being garbage-collected: a failed batch (e.g.
        ``delete_note`` done, new passages not yet added) must never be published by a later
        commit on the same writer, and the lock must be released now, not whenever Python
        drops the last reference (a traceback can keep it alive).
        """
        w = self._w
        if w is None:
            return
        with contextlib.suppress(Exception):
            w.rollback()
        self._close(w)

    def _close(self, w: tantivy.IndexWriter) -> None:
        self._w = None
        self._owner._active_writer = None
        if self._owner.defer_merges:
            self._owner._merging = w
            return
        with contextlib.suppress(Exception):
            # Consumes the writer: waits for merges, then drops it, releasing the lock file.
            w.wait_merging_threads()
