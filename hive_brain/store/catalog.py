"""A per-device cache of every note's stat, hash and frontmatter, refreshed cheaply by stat.

It is derived state (delete it and it rebuilds) that lets writes check keys and duplicates, and lets
the indexer find what changed, without parsing 10k YAML headers on every command.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NoteError
from .copies import copy_kind, has_git_markers
from .fsutil import connect_sqlite, quarantine, sqlite_tx
from .notes import LINK_KEYS, Note, link_parts, note_id, parse_bytes, read_bytes
from .secrets import RULES_VERSION, SECURE_PREFIX
from .vault import AGENTS_DIR, CONVERSATIONS_DIR, CORE_MEMORY, MEMORY_DIR, Vault, walk_markdown

CATALOG_VERSION = 6  # 3: secrets redacted (and the detector's version, below); 4: derived status; 5: CP-1252 notes read;
# 6: times in one form (notes.normal_date), version wikilinks read as ids (notes.linked_id, resolve_links)
PARSED_KEEP_CHARS = 24 << 20  # note text kept parsed between the catalog refresh and the indexer
_SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, sha TEXT,
    kind TEXT, id TEXT, memory_key TEXT, status TEXT, layer TEXT, agent TEXT, task TEXT,
    content_hash TEXT, meta TEXT, problem TEXT,
    fm_status TEXT, supersedes TEXT, next_id TEXT, copy_of TEXT, dups INTEGER, flags TEXT
);
CREATE INDEX IF NOT EXISTS notes_id ON notes(id);
CREATE INDEX IF NOT EXISTS notes_key ON notes(memory_key);
CREATE INDEX IF NOT EXISTS notes_hash ON notes(content_hash);
CREATE INDEX IF NOT EXISTS notes_agent ON notes(agent, kind);
CREATE INDEX IF NOT EXISTS notes_supersedes ON notes(supersedes);
-- `status` counts memories and unreadable notes on every request: without these, two scans of the table.
-- On an expression (:meth:`Catalog.memory_count` names it): an index on (kind, copy_of) would be picked
-- over notes_key and notes_hash by the lookups that also say kind = 'memory' (a scan of every memory).
CREATE INDEX IF NOT EXISTS notes_memory ON notes((kind = 'memory' AND copy_of = ''));
CREATE INDEX IF NOT EXISTS notes_problem ON notes(problem) WHERE problem IS NOT NULL;
CREATE TABLE IF NOT EXISTS secrets (path TEXT, line INTEGER, kind TEXT);
CREATE INDEX IF NOT EXISTS secrets_path ON secrets(path);
CREATE TABLE IF NOT EXISTS changes (type TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS notes_changes_insert BEFORE INSERT ON notes BEGIN
    INSERT INTO changes SELECT coalesce(json_extract(meta, '$.type'), ''), 1 FROM notes WHERE path = NEW.path
        ON CONFLICT(type) DO UPDATE SET n = n + 1;
    INSERT INTO changes VALUES (coalesce(json_extract(NEW.meta, '$.type'), ''), 1) ON CONFLICT(type) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS notes_changes_update AFTER UPDATE ON notes BEGIN
    INSERT INTO changes VALUES (coalesce(json_extract(OLD.meta, '$.type'), ''), 1) ON CONFLICT(type) DO UPDATE SET n = n + 1;
    INSERT INTO changes VALUES (coalesce(json_extract(NEW.meta, '$.type'), ''), 1) ON CONFLICT(type) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS notes_changes_delete AFTER DELETE ON notes BEGIN
    INSERT INTO changes VALUES (coalesce(json_extract(OLD.meta, '$.type'), ''), 1) ON CONFLICT(type) DO UPDATE SET n = n + 1;
END;
"""
# `changes` counts, per frontmatter `type`, the rows written (inserted, replaced, updated, deleted) by
# any connection of any process, old or new code alike (the triggers live in the file): a reader that
# derives something from the rows of a few types (core memory) knows from one indexed lookup whether
# it must derive it again. The BEFORE INSERT trigger counts the row an INSERT OR REPLACE drops (its
# implicit delete fires no delete trigger). " epoch" is random per file: counters restart with a file
# made afresh, and a count kept from the old one must not match by chance.
_COLUMNS = 20
_INSERT = f"INSERT OR REPLACE INTO notes VALUES ({','.join('?' * _COLUMNS)})"
GIT_MARKERS = "git-markers"


def _setup(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    # A derived cache: losing its last transactions in a power cut only costs a re-read.
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA secure_delete=ON")  # a row replaced to redact a secret leaves no copy behind
    # Rows are derived from the notes by `classify` and the secret detector; when their rules (or
    # the columns) change, forget them all.
    version = CATALOG_VERSION * 1000 + RULES_VERSION
    if db.execute("PRAGMA user_version").fetchone()[0] != version:
        with sqlite_tx(db):
            db.execute("DROP TABLE IF EXISTS notes")
            db.execute("DROP TABLE IF EXISTS secrets")
            db.execute("DROP TABLE IF EXISTS changes")
        db.execute(f"PRAGMA user_version = {version}")
    db.executescript(_SCHEMA)
    if db.execute("SELECT 1 FROM changes WHERE type = ' epoch'").fetchone() is None:
        with sqlite_tx(db):
            db.execute("INSERT OR IGNORE INTO changes VALUES (' epoch', abs(random()))")


def _jsonable(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        # YAML's .nan/.inf: json.dumps writes NaN/Infinity, which SQLite's JSON functions refuse (the
        # catalog's own queries and its change triggers read every row's meta): kept as text.
        return repr(v)
    if v is None or isinstance(v, str | int | float | bool):
        return v
    return str(v)


def classify(path: str, meta: dict[str, Any]) -> tuple[str, str, str, str]:
    """(kind, layer, agent, task) of a note, from where it lives and its frontmatter. A typed note in a
    memory folder is a memory even without an id (made from the template): it gets :func:`path_id`."""
    parts = path.split("/")
    agent = task = ""
    layer = "shared"
    if parts[0] == AGENTS_DIR and len(parts) > 2:
        agent = parts[1]
        layer = "private"
        if len(parts) > 4 and parts[2] == "Tasks":
            layer, task = "task", parts[3]
    if path == CORE_MEMORY or parts[-1] == "Core Memory.md":
        kind = "core"
    elif path.startswith("Operations/Brain Review/"):
        kind = "proposal"  # review proposals may quote agents' private memory: no recall reads them
    elif parts[0] == "Operations" and path.startswith(SECURE_PREFIX):
        kind = "note"  # status notes naming keys (values scrubbed): full-vault recall finds them (DESIGN)
    elif parts[0] == "Operations":
        kind = "operational"
    elif path.startswith(CONVERSATIONS_DIR + "/"):
        kind = "conversation"
        if len(parts) > 3:
            agent = agent or parts[2]
    elif meta.get("type") and (
        path.startswith(MEMORY_DIR + "/") or (parts[0] == AGENTS_DIR and ("Memory" in parts[2:3] or "Tasks" in parts[2:3]))
    ):
        kind = "memory"
        # Frontmatter may narrow the layer (a task memory), never widen a private folder to shared.
        fm_layer = str(meta.get("layer") or "")
        if layer == "shared" and fm_layer in ("private", "task") and meta.get("agent"):
            layer, agent, task = fm_layer, str(meta.get("agent")), str(meta.get("task") or "")
    else:
        kind = "note"
    return kind, layer, agent, task


@dataclass
class Entry:
    path: str
    mtime_ns: int
    size: int
    sha: str
    kind: str
    id: str
    memory_key: str
    status: str
    layer: str
    agent: str
    task: str
    content_hash: str
    meta: dict[str, Any]
    problem: str | None
    # What the note's own frontmatter says; ``status`` is derived from the whole chain (:meth:`Catalog.derive`).
    fm_status: str = ""
    next_id: str = ""  # the newer version: ``superseded_by``, or the note that names this one in ``supersedes``
    copy_of: str = ""  # path of the note that is this id's head when this note is a copy of it, else ""
    dups: int = 1  # notes that carry this id (more than one: a sync conflict)
    flags: str = ""  # "git-markers" when the note holds an unresolved merge

    @property
    def title(self) -> str:
        t = self.meta.get("title")
        return str(t) if t else self.path.rsplit("/", 1)[-1].removesuffix(".md")


# A recall reads ~100 candidates' rows, and a note's frontmatter changes far less often than it is read:
# parsed once per distinct text (~1 ms of a 10k recall). Shared, so an entry's meta is never changed in
# place (writers copy it: ``memory.store.with_id``).
_meta_of = functools.lru_cache(maxsize=16384)(json.loads)


def _entry(row: tuple, with_meta: bool) -> Entry:
    meta = _meta_of(row[12] or "{}") if with_meta else {}
    path, mtime_ns, size, sha, kind, mid, key, status, layer, agent, task, chash = row[:12]
    return Entry(path, mtime_ns, size, sha, kind, mid, key, status, layer, agent, task, chash, meta, row[13],
                 row[14] or "", row[16] or "", row[17] or "", row[18] or 1, row[19] or "")


def _updated(meta_updated: Any, meta_created: Any) -> str:
    return str(meta_updated or meta_created or "")


class Catalog:
    def __init__(self, vault: Vault, *, max_note_bytes: int = 5 * 1024 * 1024, db_path: Path | None = None) -> None:
        self.vault = vault
        self.max_note_bytes = max_note_bytes
        vault.state.mkdir(parents=True, exist_ok=True)
        self.path = db_path or vault.state / "catalog.sqlite"
        self._root = str(vault.root)
        # path -> (the scrubbed note, the bytes it was read from), for the indexer of the same refresh.
        self.parsed: dict[str, tuple[Note, bytes]] = {}
        self._parsed_chars = 0
        self._found: list[tuple[str, int, str]] = []
        self.db, self.was_reset = connect_sqlite(self.path, _setup, timeout=30)

    def reset(self, problem: str) -> None:
        """The file went bad under us (a damaged page met by a query): start afresh from the notes."""
        self.db.close()
        quarantine(self.path, problem)
        self.db, self.was_reset = connect_sqlite(self.path, _setup, timeout=30)
        self.was_reset = True

    def close(self) -> None:
        self.db.close()

    def refresh(self, *, only: list[str] | None = None) -> dict[str, list[str]]:
        """Re-read notes whose stat changed; returns the paths that were added/changed/removed."""
        try:
            return self._refresh(only=only)
        except sqlite3.DatabaseError as e:
            self.reset(str(e))
            return self._refresh(only=None)

    def _refresh(self, *, only: list[str] | None = None) -> dict[str, list[str]]:
        if only is not None:
            # A write re-stats what it wrote: read back only those rows (all 100k cost 0.1 s a call).
            known = {r[0]: (r[1], r[2]) for r in self._rows_for("path, mtime_ns, size", only)}
            seen = {}
            for rel in only:
                try:
                    seen[rel] = self.vault.abs(rel).stat()
                except OSError:
                    pass
            candidates = set(only)
        else:
            known = {r[0]: (r[1], r[2]) for r in self.db.execute("SELECT path, mtime_ns, size FROM notes")}
            seen = dict(walk_markdown(self.vault.root))
            candidates = set(known) | set(seen)
        added: list[str] = []
        changed: list[str] = []
        removed: list[str] = []
        rows = []
        self._found = []
        self.parsed, self._parsed_chars = {}, 0
        for rel in sorted(candidates):
            st = seen.get(rel)
            if st is None:
                if rel in known:
                    removed.append(rel)
                continue
            if known.get(rel) == (st.st_mtime_ns, st.st_size):
                continue
            (changed if rel in known else added).append(rel)
            rows.append(self._row(rel, st.st_mtime_ns, st.st_size))
        if rows or removed:
            # The ids whose derived status may move: each touched note's own id and the one it
            # supersedes, before and after the change.
            affected = {x for r in rows for x in (r[5], r[15])}
            affected.update(x for r in self._rows_for("id, supersedes", changed + removed) for x in r)
            with sqlite_tx(self.db):
                self.db.executemany(_INSERT, rows)
                self.db.executemany("DELETE FROM notes WHERE path = ?", [(p,) for p in removed])
                self.db.executemany("DELETE FROM secrets WHERE path = ?", [(r[0],) for r in rows] + [(p,) for p in removed])
                self.db.executemany("INSERT INTO secrets VALUES (?,?,?)", self._found)
                affected |= self.resolve_links(rows)
                self.derive(None if only is None and not known else affected)
        return {"added": added, "changed": changed, "removed": removed}

    def _row(self, rel: str, mtime_ns: int, size: int) -> tuple:
        try:
            # A string path: a pathlib join and open cost more than the read of a small note.
            data = read_bytes(os.path.join(self._root, rel), rel, max_bytes=self.max_note_bytes)
            # Scrubbed: frontmatter values land in `meta` and parsed notes go to the indexer.
            note = parse_bytes(rel, data, max_bytes=self.max_note_bytes, scrub=True)
        except NoteError as e:
            return (rel, mtime_ns, size, "", "broken", "", "", "", "", "", "", "", "{}", e.problem,
                    "", "", "", "", 1, self._broken_flags(rel, size))
        self._found += [(rel, line, kind) for line, kind in note.extra.get("secrets", ())]
        # Kept for the indexer, which would otherwise read and parse the same bytes again right after;
        # up to a budget, past which it re-reads (a 100k rebuild held 215 MB of parsed notes here).
        if self._parsed_chars < PARSED_KEEP_CHARS:
            self.parsed[rel] = (note, data)
            self._parsed_chars += len(note.body) + len(data)
        return self._note_row(note, mtime_ns, size)

    def _broken_flags(self, rel: str, size: int) -> str:
        """A merge that left its markers in the frontmatter breaks the YAML: say so, not only "broken"."""
        if size > self.max_note_bytes:
            return ""
        try:
            text = (self.vault.root / rel).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return GIT_MARKERS if has_git_markers(text) else ""

    def _note_row(self, note: Note, mtime_ns: int, size: int) -> tuple:
        meta = _jsonable(note.meta)
        kind, layer, agent, task = classify(note.path, note.meta)
        status = str(meta.get("status") or ("active" if kind == "memory" else ""))
        flags = GIT_MARKERS if has_git_markers(note.body) else ""
        return (
            note.path, mtime_ns, size, note.raw_sha256, kind, note_id(note.path, note.meta, kind), str(meta.get("memory_key") or ""),
            status, layer, agent, task, str(meta.get("content_hash") or ""), json.dumps(meta, ensure_ascii=False), note.problem,
            status, str(meta.get("supersedes") or "") if kind == "memory" else "",
            str(meta.get("superseded_by") or ""), "", 1, flags,
        )

    def resolve_links(self, rows: list[tuple]) -> set[str]:
        """Give the ids of the notes they link to to the link keys of these just-written rows that
        hold a wikilink without one (``supersedes: "[[deploy-target-abc123]]"``, written by hand;
        hive-brain's own links carry the id, ``notes.linked_id``): in the ``supersedes`` column and in
        ``meta``, so the chain and the derived status read ids only. The link names a vault path
        (``.md`` optional) or, as Obsidian's shortest links do, a file name anywhere in the vault.
        A link to no note stays as written (and links nothing). Returns the ids resolved."""
        found: set[str] = set()
        for r in rows:
            if "[[" not in (r[12] or ""):
                continue
            meta = json.loads(r[12])
            for key in sorted(LINK_KEYS & meta.keys()):
                parts = link_parts(meta[key])
                target_id = self._link_target(parts[0]) if parts else None
                if not target_id:
                    continue
                found.add(target_id)
                sets = "meta = json_set(meta, ?, ?)" + (", supersedes = ?" if key == "supersedes" and r[4] == "memory" else "")
                args = (f"$.{key}", target_id, *((target_id,) if "supersedes =" in sets else ()), r[0])
                self.db.execute(f"UPDATE notes SET {sets} WHERE path = ?", args)
        return found

    def _link_target(self, target: str) -> str | None:
        path = target if target.endswith(".md") else target + ".md"
        row = self.db.execute("SELECT id FROM notes WHERE path = ? AND id != ''", (path,)).fetchone()
        if row is None and "/" not in target:
            name = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            row = self.db.execute("SELECT id FROM notes WHERE (path = ? OR path LIKE ? ESCAPE '\\') AND id != '' "
                                  "ORDER BY copy_of != '', length(path), path LIMIT 1", (path, "%/" + name)).fetchone()
        return str(row[0]) if row else None

    def derive(self, ids: set[str] | None = None) -> None:
        """Derive ``status``, ``next_id``, ``copy_of`` and ``dups`` of the notes carrying ``ids`` (all
        when None) from the whole vault, not from each note alone (the cost is paid here, at refresh,
        so recall on the prompt hook path reads it for free):

        * a memory named in the ``supersedes`` of another memory of its own layer, agent and task
          that is not archived is superseded, whatever its own frontmatter says (a sync or an undo
          that brings an old version's note back as ``active`` does not make it current again; an
          agent's private note cannot supersede a shared one);
        * notes that share one id are one memory: the head is the newest by ``updated`` (then
          ``created``), then the one whose file name is not a sync tool's copy name, then the
          shortest path; the others are its copies (``copy_of`` = the head's path).
        """
        cols = ("path, id, kind, fm_status, layer, agent, task, json_extract(meta, '$.updated'), "
                "json_extract(meta, '$.created'), json_extract(meta, '$.superseded_by'), status, next_id, copy_of, dups")
        sup_cols = "id, supersedes, layer, agent, task"
        sup_where = "kind = 'memory' AND problem IS NULL AND fm_status != 'archived' AND supersedes != ''"
        if ids is None:
            rows = self.db.execute(f"SELECT {cols} FROM notes WHERE id != ''").fetchall()
            sups = self.db.execute(f"SELECT {sup_cols} FROM notes WHERE {sup_where}").fetchall()
        else:
            want = sorted(i for i in ids if i)
            rows, sups = [], []
            for i in range(0, len(want), 500):
                chunk = want[i:i + 500]
                marks = ",".join("?" * len(chunk))
                rows += self.db.execute(f"SELECT {cols} FROM notes WHERE id IN ({marks})", chunk).fetchall()
                sups += self.db.execute(f"SELECT {sup_cols} FROM notes WHERE {sup_where} AND supersedes IN ({marks})",
                                        chunk).fetchall()
        newer: dict[tuple, list[str]] = {}
        for sid, target, layer, agent, task in sups:
            if sid != target:
                newer.setdefault((target, layer, agent, task), []).append(sid)
        groups: dict[str, list[tuple]] = {}
        for r in rows:
            groups.setdefault(r[1], []).append(r)
        updates = []
        for group in groups.values():
            if len(group) > 1:  # newest first; among equals the original file name, then the shortest path
                group.sort(key=lambda r: (_updated(r[7], r[8]), copy_kind(r[0]) is None, -len(r[0]), r[0]),
                           reverse=True)
            head = group[0]
            for r in group:
                path, mid, kind, fm_status = r[0], r[1], r[2], r[3]
                status, next_id = fm_status, str(r[9] or "")
                by = sorted(newer.get((mid, r[4], r[5], r[6]), []))
                if kind == "memory" and by:
                    if fm_status == "active":
                        status = "superseded"
                    next_id = next_id or by[-1]
                derived = (status, next_id, "" if r is head else head[0], len(group))
                if derived != tuple(r[10:14]):
                    updates.append((*derived, path))
        if updates:
            self.db.executemany("UPDATE notes SET status = ?, next_id = ?, copy_of = ?, dups = ? WHERE path = ?", updates)

    def select(self, where: str = "1=1", args: tuple = (), *, with_meta: bool = True) -> list[Entry]:
        """Entries matching an SQL condition on the `notes` table (columns in `_SCHEMA`)."""
        return [_entry(r, with_meta) for r in self.db.execute(f"SELECT * FROM notes WHERE {where}", args)]

    def count(self, where: str = "1=1", args: tuple = ()) -> int:
        """How many notes match (``status`` counts; building every entry parsed 10k JSON metas)."""
        return int(self.db.execute(f"SELECT COUNT(*) FROM notes WHERE {where}", args).fetchone()[0])

    def _rows_for(self, columns: str, paths: list[str]) -> Iterator[tuple]:
        """`SELECT columns` of these paths, 500 per query (SQLite's bound-parameter limit)."""
        for i in range(0, len(paths), 500):
            chunk = paths[i:i + 500]
            yield from self.db.execute(f"SELECT {columns} FROM notes WHERE path IN ({','.join('?' * len(chunk))})",
                                       tuple(chunk))

    def by_paths(self, paths: list[str], *, with_meta: bool = True) -> dict[str, Entry]:
        return {e.path: e for e in (_entry(r, with_meta) for r in self._rows_for("*", paths))}

    def hashes(self) -> dict[str, tuple[str, str]]:
        """path -> (sha, kind) of every note: what the indexer diffs against its manifest, without
        building 100k entries (half a second of a one-note write at 100k)."""
        return {r[0]: (r[1], r[2]) for r in self.db.execute("SELECT path, sha, kind FROM notes")}

    def put_note(self, note: Note, mtime_ns: int = 0, size: int = 0) -> None:
        """Record a note that is not (or no longer) on disk, e.g. one replayed from a generation."""
        row = self._note_row(note, mtime_ns, size)
        self.db.execute(_INSERT, row)
        self.derive({row[5], row[15], *self.resolve_links([row])})

    def all(self) -> list[Entry]:
        return self.select()

    def by_id(self, memory_id: str) -> Entry | None:
        """The note of this id: its head when sync left copies carrying the same id."""
        rows = self.select("id = ? ORDER BY copy_of != '' LIMIT 1", (memory_id,))
        return rows[0] if rows else None

    def copies(self, e: Entry) -> list[Entry]:
        """The other notes that carry ``e``'s id (a sync conflict), its head first when ``e`` is a copy."""
        if e.dups < 2 or not e.id:
            return []
        return self.select("id = ? AND path != ? ORDER BY copy_of != '', path", (e.id, e.path))

    def by_key(self, key: str) -> list[Entry]:
        return self.select("memory_key = ? AND kind = 'memory' AND copy_of = ''", (key,))

    def by_content_hash(self, h: str) -> list[Entry]:
        return self.select("content_hash = ? AND kind = 'memory'", (h,))

    MEMORIES = "kind = 'memory' AND copy_of = ''"

    def memory_count(self) -> int:
        """How many memories (:attr:`MEMORIES`), from the index on that very expression."""
        return self.count(f"({self.MEMORIES}) = 1")

    def memories(self, *, types: tuple[str, ...] = ()) -> list[Entry]:
        """Every memory once: copies that share a head's id are not memories of their own. ``types``:
        only active, readable ones of these types (their JSON parsed, not every memory's)."""
        if not types:
            return self.select(self.MEMORIES)
        return self.select(f"{self.MEMORIES} AND status = 'active' AND problem IS NULL "
                           f"AND json_extract(meta, '$.type') IN ({','.join('?' * len(types))})", types)

    def change_mark(self, types: tuple[str, ...]) -> tuple:
        """Changes so far to the rows of these frontmatter types, with the file's epoch: equal marks,
        equal rows of those types (any writer's, derived columns included). Read it before the rows
        it guards, so a change between the two only makes the next mark differ."""
        marks = ",".join("?" * (len(types) + 1))
        return tuple(sorted(self.db.execute(f"SELECT type, n FROM changes WHERE type IN ({marks})", (" epoch", *types))))

    def problems(self) -> list[Entry]:
        return self.select("problem IS NOT NULL")

    def secrets(self) -> list[tuple[str, int, str]]:
        """(path, line, kind) of every secret found in a note (the value is never stored)."""
        return [(str(p), int(n), str(k)) for p, n, k in self.db.execute("SELECT path, line, kind FROM secrets ORDER BY path, line")]
