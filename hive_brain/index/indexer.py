"""Vault → generation → lexical + vector index, incrementally.

Notes are diffed against the manifest of the ``current`` generation (not against the last catalog
refresh), so whatever happened in between — a hand edit, a crash after the notes were written but
before the index was — is picked up by the next catch-up. Lexical indexing is synchronous and cheap;
vectors are queued (``pending.sqlite``) and embedded in chunks, outside the lock, by the server, by
``rebuild-index`` or by a semantic recall: a write never waits for the model. Deleting the vectors
of a changed or removed note is queued the same way (table ``deleted``) and done by whoever embeds
next, before its upserts: a write never even imports LanceDB (9 s of a loaded one-note write).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import GenerationCorrupt, LockTimeout, NoteError, StateDamaged
from ..store.catalog import Catalog
from ..store.copies import without_git_markers
from ..store.fsutil import (
    connect_sqlite,
    fsync_dir,
    quarantine,
    sha256_bytes,
    sqlite_damage,
    sqlite_tx,
    write_fsync,
)
from ..store.journal import crash_point
from ..store.lock import vault_lock
from ..store.notes import Note, date_of, note_id, note_tags, parse_bytes, to_text_list
from ..store.secrets import RULES_VERSION, scrub_bytes
from ..store.vault import OKF_EXPORT_DIR, Vault
from .generations import GenerationStore

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from .embcache import EmbeddingCache
    from .lexical import LexicalIndex
    from .vectors import VectorIndex

PASSAGE_WORDS = 200
# Bump when passage splitting or the indexed document changes: the next catch-up rebuilds in full.
# 5: secrets are scrubbed from everything indexed (the detector's own version is part of the key too);
# 6: inline #tags are tags, aliases are searched as title words; 7: git conflict marker lines are not text.
PASSAGES_VERSION = 7
WINDOW_TURNS = 3  # conversation turns per vector-only window
WINDOW_STRIDE = 2
FLUSH_BYTES = 32 << 20  # note bytes held for the object store before they are written out
FLUSH_ROWS = 5_000  # queued vector rows held before they are written out
# Not indexed: the OKF export (copies of notes that are indexed where they live), the typed-memory form
# the vault template ships (``Templates/Memory.md``: an empty form, which matched "what did we learn"
# questions; the user's own templates are ordinary notes, searched by full-vault recall as DESIGN
# says), and agent skills (``Skills/<name>/SKILL.md``: instructions read by the agent's skill loader).
# The skills the vault template ships are about hive-brain and Obsidian, and as notes they matched
# every developer question (the demo's "which node dependency tool" answered with one); the ones
# `review skill` writes are copies of an approved workflow, which recall finds once, as the `procedure`
# memory applying the proposal makes. Other notes under Skills/ are notes like any other.
SKIP_PREFIXES = (OKF_EXPORT_DIR + "/",)
SKIP_GLOBS = ("Skills/*/SKILL.md", "Templates/Memory.md")  # SQLite GLOB and fnmatch alike: '*' also matches '/'
# Names what a catch-up is changing in the index until its generation is published (see _reconcile).
IN_FLIGHT = "in-flight.json"
# Where tests kill a catch-up (HIVE_BRAIN_CRASH_AT, see store.journal.crash_point), in order.
CRASH_POINTS = ("index-after-unqueue", "index-before-publish", "generation-before-current", "index-after-publish")
# ``progress(phase, done, total)`` of a rebuild: phase "notes" (lexical) then "passages" (vectors).
PhaseProgress = Callable[[str, int, int], None]
FULL = "full"  # "the whole index", for _read_in_flight / _write_in_flight


def _setup_pending(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")  # derived: a lost row is re-queued by the next rebuild
    db.execute("CREATE TABLE IF NOT EXISTS pending (passage_id TEXT PRIMARY KEY, note_path TEXT, text_hash TEXT, row TEXT)")
    db.execute("CREATE INDEX IF NOT EXISTS pending_note ON pending(note_path)")
    db.execute("CREATE TABLE IF NOT EXISTS deleted (note_path TEXT PRIMARY KEY)")


def indexable(path: str, sha: str, kind: str) -> bool:
    return (kind != "broken" and bool(sha) and not path.startswith(SKIP_PREFIXES)
            and not any(fnmatch.fnmatchcase(path, g) for g in SKIP_GLOBS))


def write_label(paths: list[str]) -> str:
    """The generation label of a write (``memory.layers.redact_paths`` reads it back: keep the form)."""
    return "write: " + ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else "")


def note_date(meta: dict[str, Any], mtime_ns: int, kind: str = "") -> int:
    """A note's date in the index (cutoffs, windows). A memory version's is when it came to be, its
    ``created``: ``evolve`` bumps the old version's ``updated`` when it marks it superseded, and a
    cutoff on that hid the version that was current then (issue 28)."""
    order = ("created", "date", "updated") if kind == "memory" else ("date", "updated", "created")
    for k in order:
        d = date_of(meta.get(k))
        if d is not None:
            return int(d.timestamp())
    return int(mtime_ns // 1_000_000_000)


def build_docs(path: str, data: bytes | Note, *, kind: str, layer: str, agent: str, task: str,
               mtime_ns: int = 0, vectors: bool = True) -> tuple[list[dict], list[dict]]:
    """(lexical docs, vector rows without vectors) for one note (its bytes, or already parsed).
    ``vectors=False``: no rows (nothing will embed them: an index without a pack)."""
    from .passages import embed_text, split_passages

    # Everything below derives from the scrubbed note: no secret reaches tantivy, LanceDB rows or the
    # embedding queue (a Note from the catalog was scrubbed when it was read).
    note = data if isinstance(data, Note) else parse_bytes(path, data, scrub=True)
    meta = note.meta
    title = note.title
    ts = note_date(meta, mtime_ns, kind)
    date_str = time.strftime("%Y-%m-%d", time.gmtime(ts)) if ts else None
    status = str(meta.get("status") or ("active" if kind == "memory" else ""))
    base = {
        "note_path": path,
        "note_id": note_id(path, meta, kind),
        "kind": kind,
        "type": str(meta.get("type") or ""),
        "layer": layer,
        "agent": agent,
        "task": task,
        "project": str(meta.get("project") or ""),
        "status": status,
        "memory_key": str(meta.get("memory_key") or ""),
        "date": ts,
    }
    docs, rows = [], []
    from .textproc import analyze_joined

    aliases, tags = to_text_list(meta.get("aliases")), note_tags(meta, note.body)
    questions = note_questions(meta)
    terms: list[str] = []
    # A pull that stopped on a conflict leaves marker lines in the note: both sides are the note's text
    # (doctor names the note), the markers and the commit subjects on them are not.
    body = without_git_markers(note.body)
    for p in split_passages(title, body, max_words=PASSAGE_WORDS, date=date_str):
        etext = embed_text(title, p, date=date_str if kind == "conversation" else None)
        th = sha256_bytes(etext.encode("utf-8"))
        pid = f"{path}#{p.index}"
        t = analyze_joined(p.text)
        terms.append(t)
        docs.append({
            **base, "unit": "passage", "passage_id": pid, "title": title, "aliases": aliases, "tags": tags,
            "questions": questions, "heading": p.heading, "text": p.text, "text_terms": t, "text_hash": th,
        })
        if vectors:
            rows.append({**base, "passage_id": pid, "text_hash": th, "_embed_text": etext})
            if kind == "conversation":
                rows.extend(_turn_windows(base, pid, title, p.text, date_str))
    if len(docs) == 1:
        docs[0]["unit"] = "whole"  # the only passage is also the whole note: indexed once, found by both
    else:
        # The whole note as one more document: BM25 over the whole note is the strongest lexical
        # signal for questions whose words are spread over several passages (measured on LoCoMo).
        docs.append({**base, "unit": "note", "passage_id": f"{path}#note", "title": title, "aliases": aliases,
                     "tags": tags, "questions": questions, "heading": "", "text": "", "text_terms": " ".join(terms), "text_hash": ""})
    if vectors:
        rows.extend(_name_rows(base, f"{path}#0", title, aliases, questions))
    return docs, rows


def written_terms(root: Path, catalog: Catalog, paths: list[str]) -> set[str]:
    """Every term a search could match in ``paths`` as the next catch-up will index them (the notes
    on disk, the catalog's rows for them): what a read asks of notes written but not yet indexed. A
    note gone or unreadable adds nothing (the catch-up removes or skips it)."""
    from .lexical import doc_terms

    out: set[str] = set()
    for p, e in catalog.by_paths(paths, with_meta=False).items():
        try:
            data = (root / p).read_bytes()
        except OSError:
            continue
        try:
            docs, _rows = build_docs(p, data, kind=e.kind if e.kind != "broken" else "note", layer=e.layer,
                                     agent=e.agent, task=e.task, mtime_ns=e.mtime_ns, vectors=False)
        except Exception:  # noqa: BLE001 - the catch-up skips a note it cannot index: so does this
            continue
        out |= doc_terms(docs)
    return out


def note_questions(meta: dict) -> list[str]:
    """The note's ``questions`` property: a list, or one string that is one question (commas and all)."""
    v = meta.get("questions")
    return [" ".join(v.split())] if isinstance(v, str) and v.strip() else to_text_list(v) if isinstance(v, list) else []


def _name_rows(base: dict, pid: str, title: str, aliases: list[str], questions: list[str]) -> list[dict]:
    """Vector-only units for what the writer said the note is called and asked as (`<first passage>~q<n>`):
    a question embeds near the questions worded like it, which a passage that answers it in other
    words may not; they score for the note's first passage."""
    texts = [*questions, *([", ".join(aliases)] if aliases else [])]
    out = []
    for n, q in enumerate(texts):
        etext = f"{title}\n{q}" if title else q
        out.append({**base, "passage_id": f"{pid}~q{n}", "text_hash": sha256_bytes(etext.encode("utf-8")),
                    "_embed_text": etext})
    return out


def _turn_windows(base: dict, pid: str, title: str, text: str, date_str: str | None) -> list[dict]:
    """Extra vector-only units for conversations: a few turns with their neighbours. Dense retrieval
    matches one exchange far better than a 200-word window (measured on LoCoMo); their ids
    (`<passage_id>~w<n>`) map back to the passage they come from."""
    turns = [t for t in text.split("\n") if t.strip()]
    if len(turns) <= WINDOW_TURNS:
        return []
    out = []
    for n, start in enumerate(range(0, len(turns) - WINDOW_TURNS + WINDOW_STRIDE, WINDOW_STRIDE)):
        chunk = "\n".join(turns[start:start + WINDOW_TURNS])
        etext = f"{title} ({date_str})\n{chunk}" if date_str else f"{title}\n{chunk}"
        out.append({**base, "passage_id": f"{pid}~w{n}", "text_hash": sha256_bytes(etext.encode("utf-8")),
                    "_embed_text": etext})
    return out


def configured_pack(settings: Settings) -> Path | None:
    """The embedding pack these settings resolve to now (an :class:`Indexer` keeps the one it opened)."""
    if not settings.semantic:
        return None
    from ..embedding.pack import find_pack

    try:
        return find_pack(Path(settings.model_dir), settings.embedding_pack or None)
    except Exception:  # noqa: BLE001 - a broken pack means "lexical only", reported by status
        return None


def configured_pack_key(settings: Settings) -> str | None:
    """The key of :func:`configured_pack` (None: no usable pack): a running server compares it with
    the key it loaded, so a pack installed or replaced after its start is taken up."""
    pack = configured_pack(settings)
    if pack is None:
        return None
    from ..embedding.pack import pack_key, read_manifest

    try:
        return pack_key(read_manifest(pack))
    except Exception:  # noqa: BLE001 - as configured_pack
        return None


class Indexer:
    def __init__(self, vault: Vault, settings: Settings, *, catalog: Catalog | None = None) -> None:
        self.vault = vault
        self.settings = settings
        self.catalog = catalog or Catalog(vault, max_note_bytes=settings.max_note_bytes)
        self.dir = vault.state / "index"
        self.gens = GenerationStore(vault.state)
        self._had_vectors: set[str] = set()
        self._pending_reset = False  # the vector queue was found damaged and started afresh
        self._vectors_reset = False  # likewise the vector table

    # -- components ------------------------------------------------------------------------------
    @cached_property
    def lexical(self) -> LexicalIndex:
        """The writer-side handle: an index from another analyzer/schema version is wiped (it is a
        cache) and the next catch-up re-indexes everything. Open it only while holding the lock."""
        from .lexical import LexicalIndex

        return LexicalIndex(self.dir / "lexical", reset_incompatible=True)

    def reader(self) -> LexicalIndex:
        """A read-only handle that never resets or writes (the prompt hook's path)."""
        from .lexical import LexicalIndex

        return LexicalIndex(self.dir / "lexical", read_only=True)

    @cached_property
    def pack_dir(self) -> Path | None:
        return configured_pack(self.settings)

    @cached_property
    def pack_manifest(self) -> dict | None:
        if self.pack_dir is None:
            return None
        from ..embedding.pack import read_manifest

        return read_manifest(self.pack_dir)

    @cached_property
    def pack_key(self) -> str | None:
        if self.pack_manifest is None:
            return None
        from ..embedding.pack import pack_key

        return pack_key(self.pack_manifest)

    @cached_property
    def vectors(self) -> VectorIndex | None:
        manifest = self.pack_manifest
        if self.pack_key is None or manifest is None:
            return None
        from .vectors import VectorIndex

        vec = VectorIndex(self.dir / "vectors", self.pack_key, int(manifest["dim"]))
        vec.on_damage = self._vectors_damaged
        return vec

    @cached_property
    def embedder(self) -> Embedder | None:
        if self.pack_dir is None:
            return None
        from ..embedding.embedder import get_embedder

        return get_embedder(self.pack_dir)

    @cached_property
    def embcache(self) -> EmbeddingCache:
        from .embcache import EmbeddingCache

        return EmbeddingCache(self.vault.state / "embcache.sqlite")

    @cached_property
    def pending(self) -> sqlite3.Connection:
        # A damaged queue is moved aside and started empty; what it held is re-queued by a full
        # pass (`_needs_full_rebuild` sees `_pending_reset`).
        db, self._pending_reset = connect_sqlite(self.dir / "pending.sqlite", _setup_pending, timeout=30)
        return db

    def reset_pending(self, problem: str) -> None:
        """The vector queue is damaged (found by a check or a query): move it aside, start empty."""
        if "pending" in self.__dict__:
            self.__dict__.pop("pending").close()
        quarantine(self.dir / "pending.sqlite", problem)
        self.pending  # noqa: B018 - reopens (empty)
        self._pending_reset = True

    def index_info(self) -> dict:
        from .textproc import analyzer_fingerprint

        return {"analyzer": analyzer_fingerprint(), "passages": f"{PASSAGES_VERSION}/{PASSAGE_WORDS}/s{RULES_VERSION}",
                "pack": self.pack_key}

    # -- state ---------------------------------------------------------------------------------
    def current_manifest(self) -> tuple[int | None, dict[str, str]]:
        gid = self.gens.current_id()
        return gid, (self.gens.manifest(gid) if gid is not None else {})

    def _needs_full_rebuild(self, gid: int | None) -> bool:
        if gid is None:
            return True
        g = self.gens.load(gid)
        info = self.index_info()
        # A different (or newly installed) embedding pack re-queues every passage for vectors. A process
        # with no pack (semantic off in its shell, no model installed) keeps the index's queue for the
        # index's pack instead (see catch_up): re-indexing every note for that cost a server started
        # with another semantic setting 13.5 s at 10k notes instead of 0.56 s.
        return (
            g.index.get("analyzer") != info["analyzer"] or g.index.get("passages") != info["passages"]
            or (info["pack"] is not None and g.index.get("pack") != info["pack"])
            or self.lexical.was_reset or self.lexical.doc_count() == 0 and g.note_count > 0
            or self._derived_reset()
        )

    def _derived_reset(self) -> bool:
        """Whether the object store, the vector queue or the vectors were found damaged and started
        afresh: what the current generation stored there is gone, and only a full pass puts it back.
        (Not opened here just to check: whoever opens one next finds the damage, and the catch-up
        that does leaves a "full" in-flight record for the next one.)"""
        return self.gens.objects_reset or self._pending_reset or self._vectors_reset

    def diff(self, only: list[str] | None = None) -> tuple[int | None, dict[str, str], list[str], list[str]]:
        """(current gen, path -> sha of every indexable note now, paths to (re)index, paths to remove).

        `only`: re-stat just these paths (a write knows what it wrote; the write session already
        refreshed the rest) instead of walking the whole vault; the diff is still against the full
        manifest, so anything the catalog knows changed is indexed too."""
        self.catalog.refresh(only=only)
        gid, man = self.current_manifest()
        # The same rule as `indexable`, in SQL, and the comparison as set operations on dict views:
        # this diff runs under the lock on every write (a third of a one-note write at 10k notes).
        globs = (*(f"{p}*" for p in SKIP_PREFIXES), *SKIP_GLOBS)
        skip = " ".join("AND path NOT GLOB ?" for _ in globs)
        now = dict(self.catalog.db.execute(f"SELECT path, sha FROM notes WHERE kind != 'broken' AND sha != '' {skip}",
                                           globs))
        todo = {p for p, _sha in now.items() - man.items()}
        gone = man.keys() - now.keys()
        self._had_vectors = todo & man.keys()  # a new note has no old vectors to delete
        return gid, now, sorted(todo), sorted(gone)

    # -- writing (caller holds the vault lock) ---------------------------------------------------
    def catch_up(self, *, changed: list[str] | None = None, progress: Callable[[int, int], None] | None = None,
                 label: str = "catch-up", full: bool = False) -> dict:
        t0 = time.perf_counter()
        gid, now, todo, gone = self.diff(only=changed)
        full = full or self._needs_full_rebuild(gid)
        in_flight = self._read_in_flight()
        if in_flight == FULL:
            full = True
        elif isinstance(in_flight, list):
            todo, gone = self._reconcile(in_flight, now, todo, gone)
        if full:
            todo, gone = sorted(now), []
        if not todo and not gone and not full:
            return {"generation": gid, "indexed": 0, "removed": 0, "seconds": 0.0, "changed": False}
        # Said (durably) before the index changes: a crash from here to the publish below leaves
        # the index ahead of `current`, and the next catch-up re-does exactly these paths.
        self._write_in_flight(FULL if full else sorted({*todo, *gone}))
        manifest = dict(now)
        entries = self.catalog.by_paths(todo, with_meta=False)
        # Without a pack nothing would ever drain a vector queue: do not build one. Installing a pack
        # changes the index info, which makes the next catch-up a full pass that queues every passage.
        # An index built with a pack that this process lacks keeps its queue for that pack (the rows
        # are the same whatever the model; only embedding needs it), so a process with semantic off
        # forces no full pass on the next one with it on, nor it on this one.
        carried = None
        if self.pack_key is None and not full and gid is not None:
            carried = self.gens.load(gid).index.get("pack")
        queue = self.pack_key is not None or carried is not None
        pend_rows: list[tuple] = []
        objects: dict[str, bytes] = {}
        object_bytes = n_passages = 0
        if queue:
            self._unqueue(full=full, removed=gone + todo)
        crash_point("index-after-unqueue")
        with self.lexical.writer() as w:
            if full:
                w.delete_all()
            for p in gone:
                w.delete_note(p)
            for i, p in enumerate(todo):
                e = entries.get(p)
                if e is None:  # gone from the catalog since the diff
                    manifest.pop(p, None)
                    continue
                held = self.catalog.parsed.pop(p, None)  # freed as it is used
                parsed: Note | None = None
                if held is not None and held[0].raw_sha256 == e.sha:
                    # Read and parsed by this pass's catalog refresh, its row made from these very
                    # bytes: index them (an edit since then changed the stat; the next pass takes it).
                    parsed, data = held
                    sha = e.sha
                else:
                    try:
                        data = (self.vault.root / p).read_bytes()
                    except OSError:
                        manifest.pop(p, None)
                        continue
                    sha = sha256_bytes(data)
                    if sha != e.sha:  # edited since the catalog looked: index what is on disk now
                        manifest[p] = sha
                if parsed is None:
                    try:
                        parsed = parse_bytes(p, data, scrub=True)
                    except NoteError:
                        parsed = None
                # The object store keeps note bytes for replay: scrubbed ones when the note holds a
                # secret (the scrubbing parse says whether it does: one scan of a clean note).
                clean = scrub_bytes(data, path=p) if parsed is None or parsed.extra.get("scrubbed") else data
                objects[sha] = data if clean is data else self.gens.redacted_object(clean)
                object_bytes += len(data)
                if object_bytes > FLUSH_BYTES:
                    # Streamed out instead of held: a 100k rebuild held every note's bytes twice.
                    # Storing objects early is safe: they are content-addressed, and only a
                    # published generation refers to them.
                    self.gens.put_objects(objects)
                    objects, object_bytes = {}, 0
                if not full:
                    w.delete_note(p)
                try:
                    docs, rows = build_docs(p, parsed if parsed is not None else data, kind=e.kind if e.kind != "broken" else "note", layer=e.layer,
                                            agent=e.agent, task=e.task, mtime_ns=e.mtime_ns, vectors=queue)
                except Exception:  # noqa: BLE001 - one odd note must not stop the index; doctor reports it
                    manifest.pop(p, None)
                    continue
                for d in docs:
                    w.add(d)
                n_passages += len(docs)
                if queue:
                    pend_rows.extend((r["passage_id"], p, r["text_hash"], json.dumps(r, ensure_ascii=False)) for r in rows)
                    if len(pend_rows) >= FLUSH_ROWS:
                        self._queue_rows(pend_rows)
                        pend_rows = []
                if progress and (i % 200 == 0 or i == len(todo) - 1):
                    progress(i + 1, len(todo))
        self.gens.put_objects(objects)
        self.catalog.parsed = {}
        if full:
            # A full pass may have replaced unscrubbed rows (an index built before secrets were
            # scrubbed): leave no copy of them in either WAL.
            if self.gens.scrub_stored() is not None:
                # Replay caches were built from objects as they were then: rebuilt on demand.
                shutil.rmtree(self.vault.state / "replay", ignore_errors=True)
            self.gens.truncate_wal()
            self.catalog.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if queue:
            self._queue_rows(pend_rows)
            if full:
                self._drop_vectors()
            else:
                self._queue_deletions(gone + [p for p in todo if p in self._had_vectors])
                if "lancedb" in sys.modules and self.vectors is not None:
                    # A process that has LanceDB loaded anyway (the server, an MCP server after a
                    # semantic recall) deletes at once, as before: no window with stale vectors.
                    with contextlib.suppress(StateDamaged):  # moved aside; the next pass is full
                        self._apply_deletions()
        crash_point("index-before-publish")
        info = self.index_info()
        if carried is not None:
            info["pack"] = carried
        g = self.gens.publish(manifest, index=info, label=label, force_checkpoint=full)
        crash_point("index-after-publish")
        if full:
            self.gens.objects_reset = self._pending_reset = self._vectors_reset = False
        if self.gens.objects_reset or self._pending_reset or self._vectors_reset:
            self._write_in_flight(FULL)  # found damaged during this pass: the next one is a full one
        else:
            self._clear_in_flight()
        return {"generation": g.id, "indexed": len(todo), "passages": n_passages, "removed": len(gone),
                "seconds": round(time.perf_counter() - t0, 3), "changed": True, "full": full, "notesHash": g.notes_hash}

    # -- crash consistency: the index never runs ahead of `current` unnoticed -------------------
    @property
    def _in_flight_path(self) -> Path:
        return self.dir / IN_FLIGHT

    def _read_in_flight(self) -> list[str] | str | None:
        """What an unfinished catch-up may have changed in the index: None (nothing: the index
        matches `current`), FULL, or the note paths it was (re)indexing or removing."""
        try:
            raw = self._in_flight_path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return FULL
        if not raw.strip():
            # Only a kill between truncating and writing the record leaves it empty, and that is
            # before the index was touched: nothing to redo.
            return None
        try:
            rec = json.loads(raw)
            if rec.get("full"):
                return FULL
            paths = rec["paths"]
            if not isinstance(paths, list):
                raise TypeError("paths is not a list")
            return [str(p) for p in paths]
        except (ValueError, TypeError, KeyError, AttributeError):
            return FULL  # damaged: what it named is unknown, so everything is redone

    def _write_in_flight(self, what: list[str] | str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        body = {"full": True} if what == FULL else {"paths": what}
        existed = self._in_flight_path.exists()
        write_fsync(self._in_flight_path, json.dumps(body, ensure_ascii=False).encode("utf-8"))
        if not existed:
            fsync_dir(self.dir)

    def _clear_in_flight(self) -> None:
        # Emptied, not fsynced: losing this write to a power cut only repeats a reconcile.
        with contextlib.suppress(OSError), open(self._in_flight_path, "wb"):
            pass

    def _reconcile(self, in_flight: list[str], now: dict[str, str], todo: list[str],
                   gone: list[str]) -> tuple[list[str], list[str]]:
        """A catch-up died after changing the index and before publishing: the manifest diff
        cannot see what it did (a note it indexed may be gone since, or back to the content
        `current` names). Every path it touched, and every indexed or queued path that is no note
        any more, is redone against the notes on disk; their old vectors are deleted too."""
        suspects = set(in_flight)
        suspects.update(self.lexical.note_paths())
        suspects.update(r[0] for r in self.pending.execute("SELECT DISTINCT note_path FROM pending"))
        redo = {p for p in suspects if p in now} & set(in_flight)
        drop = {p for p in suspects if p not in now}
        self._had_vectors |= redo
        return sorted(set(todo) | redo), sorted(set(gone) | drop)

    # -- damaged derived files ----------------------------------------------------------------
    def _vectors_damaged(self, problem: str) -> None:
        """LanceDB could not read its files: move them aside and queue a full pass that embeds
        every passage again (from the embedding cache, mostly). Readers answer lexically meanwhile."""
        try:
            with vault_lock(self.vault.state, timeout=0, command="repair vectors"):
                if self.vectors is not None:
                    self.vectors.quarantine(problem)
                self._vectors_reset = True
                self._write_in_flight(FULL)
        except LockTimeout:
            pass  # the holder, or the next reader, meets the damage again and repairs it

    def check(self, *, deep: bool = True) -> list[str]:
        """Read every derived file, move aside what is damaged (one line each on stderr), and
        make the next catch-up a full pass that rebuilds it from the notes. Caller holds the lock.
        ``deep`` also reads every lexical document and vector row (``doctor``); ``rebuild`` does
        not need to: it rewrites both, and opening them already moves an unreadable one aside."""
        found: list[str] = []
        if problem := sqlite_damage(self.catalog.db):
            self.catalog.reset(problem)
            found.append(f"catalog.sqlite: {problem}")
        if problem := sqlite_damage(self.gens._db):
            self.gens.reset_objects(problem)
            found.append(f"generations/objects.sqlite: {problem}")
        if problem := sqlite_damage(self.pending):
            self.reset_pending(problem)
            found.append(f"index/pending.sqlite: {problem}")
        # A lexical-only index never made the embedding cache: opening it to check it would create it.
        if ("embcache" in self.__dict__ or (self.vault.state / "embcache.sqlite").exists()) and (
                problem := self.embcache.damage()):
            found.append(f"embcache.sqlite: {problem}")
        if deep and (problem := self.lexical.damage()):
            self.__dict__.pop("lexical")
            quarantine(self.dir / "lexical", problem)
            found.append(f"index/lexical: {problem}")
        if deep and self.vectors is not None and (problem := self.vectors.damage()):
            self.vectors.quarantine(problem)
            self._vectors_reset = True
            found.append(f"index/vectors: {problem}")
        if found:
            self._write_in_flight(FULL)
        try:
            self.gens.read_coverage()
        except GenerationCorrupt as e:  # the last prune's record: written anew, no notes to re-read
            self.gens.repair_coverage()
            found.append(f"generations/coverage.json: {e.__cause__ or e}")
        return found

    def _unqueue(self, *, full: bool, removed: list[str]) -> None:
        """Forget queued passages of notes about to be re-indexed or removed (all of them on a full pass)."""
        with sqlite_tx(self.pending) as db:
            if full:
                db.execute("DELETE FROM pending")
                db.execute("DELETE FROM deleted")  # the full pass empties the table itself
            else:
                db.executemany("DELETE FROM pending WHERE note_path = ?", [(p,) for p in removed])

    def _queue_rows(self, rows: list[tuple]) -> None:
        if rows:
            with sqlite_tx(self.pending) as db:
                db.executemany("INSERT OR REPLACE INTO pending VALUES (?,?,?,?)", rows)

    def _drop_vectors(self) -> None:
        """A full pass: every vector goes now (rare and slow anyway); all passages are queued again."""
        if self.vectors is None or not self.vectors.directory.exists():
            return
        self.vectors.delete_all()
        # Vectors of another (older) pack are never compared with this one's: free the disk.
        self.vectors.drop_other_tables()

    def _queue_deletions(self, removed: list[str]) -> None:
        """Vectors of re-indexed or removed notes must go; whoever embeds next deletes them (see
        ``_apply_deletions``) before upserting the passages queued again. Until then a semantic
        search could meet them, so every embedding caller runs the pass first: a semantic recall
        without a server (``Engine.view``), and the server, which deletes at once (LanceDB loaded)."""
        if removed:
            with sqlite_tx(self.pending) as db:
                db.executemany("INSERT OR IGNORE INTO deleted VALUES (?)", [(p,) for p in removed])

    def _apply_deletions(self) -> int:
        """Delete the vectors of notes queued by writes (caller holds the vault lock). Every passage
        still pending for such a note was queued by the same write or a later one, so deleting first
        and upserting after never removes a current vector."""
        paths = [r[0] for r in self.pending.execute("SELECT note_path FROM deleted")]
        if not paths:
            return 0
        if self.vectors is not None:
            self.vectors.delete_notes(paths)
        with sqlite_tx(self.pending) as db:
            db.executemany("DELETE FROM deleted WHERE note_path = ?", [(p,) for p in paths])
        return len(paths)

    def queued_deletions(self) -> int:
        return int(self.pending.execute("SELECT COUNT(*) FROM deleted").fetchone()[0])

    def uncached_pending(self, limit: int) -> list[tuple[str, str]]:
        """(text hash, text) of the next `limit` queued passages the embedding cache lacks, in the
        order `embed_pending` takes them: a server fills the cache in short slices with these, and
        `embed_pending` then only reads the cache and writes the vectors in one batch."""
        rows = self.pending.execute("SELECT text_hash, row FROM pending LIMIT ?", (limit,)).fetchall()
        texts: dict[str, str] = {}
        for th, row in rows:
            texts.setdefault(th, str(json.loads(row)["_embed_text"]))
        if self.embedder is None:
            return []
        have = self.embcache.get_many(self.embedder.pack_key, list(texts))
        return [(h, t) for h, t in texts.items() if h not in have]

    def pending_count(self) -> int:
        """Queued vector work: passages to embed plus notes whose old vectors must go (callers start an
        embedding pass when this is not zero, and the pass does both)."""
        return int(self.pending.execute("SELECT (SELECT COUNT(*) FROM pending) + (SELECT COUNT(*) FROM deleted)")
                   .fetchone()[0])

    def embed_pending(self, *, chunk: int = 64, progress: Callable[[int, int], None] | None = None,
                      lock_timeout: float | None = None, max_seconds: float | None = None) -> dict:
        """Embed queued passages in chunks: the model runs outside the lock; only the upsert holds it."""
        if self.vectors is None or self.embedder is None:
            return {"embedded": 0, "pending": self.pending_count(), "semantic": False}
        from .embcache import embed_with_cache

        total = self.pending_count()
        done = 0
        t0 = time.monotonic()
        while True:
            batch = self.pending.execute("SELECT passage_id, text_hash, row FROM pending LIMIT ?", (chunk,)).fetchall()
            if not batch and not self.queued_deletions():
                break
            rows = [json.loads(r[2]) for r in batch]
            texts = {r["text_hash"]: r["_embed_text"] for r in rows}

            # Reported per model batch, not per chunk: a chunk of 256 passages takes a minute on a
            # loaded machine, and a bar that moves once a minute can show neither rate nor ETA.
            def step(k: int, m: int, before: int = done, rows_in_chunk: int = len(batch)) -> None:
                if progress is not None and m:
                    progress(min(before + rows_in_chunk * k // m, total), total)

            vecs = embed_with_cache(self.embedder, self.embcache, texts, step) if texts else {}
            try:
                self._embed_batch(batch, vecs, lock_timeout)
            except StateDamaged as e:
                # Moved aside by _vectors_damaged; the next catch-up queues every passage again.
                return {"embedded": done, "pending": self.pending_count(), "semantic": True, "damaged": e.message,
                        "seconds": round(time.monotonic() - t0, 3)}
            if not batch:
                break
            done += len(batch)
            if progress:
                progress(min(done, total), total)
            if max_seconds is not None and time.monotonic() - t0 > max_seconds:
                break
        left = self.pending_count()
        if progress and not left:
            progress(total, total)  # queued deletions count in the total but are no rows of a batch
        return {"embedded": done, "pending": left, "semantic": True, "seconds": round(time.monotonic() - t0, 3)}

    def _embed_batch(self, batch: list[tuple], vecs: dict, lock_timeout: float | None) -> None:
        """Apply queued deletions, then upsert the batch's vectors (under the lock)."""
        assert self.vectors is not None
        with vault_lock(self.vault.state, timeout=lock_timeout or self.settings.lock_timeout, command="embed"):
            self._apply_deletions()
            up, still = [], []
            if batch:
                # Re-read under the lock: a write may have re-queued a passage meanwhile. The same
                # text keeps its vector, but the row's fields (status after an evolve) are the new ones.
                for pid, th, row in self.pending.execute(
                    f"SELECT passage_id, text_hash, row FROM pending WHERE passage_id IN ({','.join('?' * len(batch))})",
                    [b[0] for b in batch],
                ):
                    if th in vecs:
                        rr = {k: v for k, v in json.loads(row).items() if k != "_embed_text"}
                        rr["vector"] = vecs[th]
                        up.append(rr)
                        still.append((pid, th))
            if up:
                self.vectors.upsert(up)
            if still:
                with sqlite_tx(self.pending):
                    self.pending.executemany("DELETE FROM pending WHERE passage_id = ? AND text_hash = ?", still)

    def rebuild(self, *, progress: PhaseProgress | None = None, embed: bool = True) -> dict:
        """Rebuild the whole index from the Markdown notes (lexical first, then vectors).

        ``progress(phase, done, total)`` is called as each phase advances (``"notes"`` indexed, then
        ``"passages"`` embedded); the CLI draws it. ``seconds`` is the lexical phase, ``vectors.seconds``
        the embedding, ``totalSeconds`` the whole rebuild.
        """
        t0 = time.monotonic()

        def phase(name: str) -> Callable[[int, int], None] | None:
            return None if progress is None else (lambda done, total: progress(name, done, total))

        with vault_lock(self.vault.state, timeout=self.settings.lock_timeout, command="rebuild-index"):
            from ..store.journal import recover

            recover(self.vault)
            # Every derived file must be readable before a rebuild relies on it: a damaged one is
            # moved aside here (the full pass below refills it), so a rebuild always succeeds.
            damaged = self.check(deep=False)
            res = self.catch_up(progress=phase("notes"), label="rebuild", full=True)
            res["damaged"] = damaged
        if embed:
            res["vectors"] = self.embed_pending(progress=phase("passages"), chunk=256)
            if self.vectors is not None and res["vectors"].get("embedded"):
                # Many small appends leave many LanceDB fragments (a 2x slower search): merge them.
                with vault_lock(self.vault.state, timeout=self.settings.lock_timeout, command="compact vectors"):
                    self.vectors.optimize()
        else:
            res["vectors"] = {"pending": self.pending_count()}
        res["totalSeconds"] = round(time.monotonic() - t0, 3)
        return res

    def try_catch_up(self) -> dict | None:
        """For readers: catch up if the vault changed and nobody else is writing; never wait."""
        try:
            with vault_lock(self.vault.state, timeout=0, command="catch-up"):
                from ..store.journal import recover

                recover(self.vault)
                return self.catch_up()
        except LockTimeout:
            return None
