"""A per-device cache of every note's stat, hash and frontmatter, refreshed cheaply by stat.

It is derived state (delete it and it rebuilds) that lets writes check keys and duplicates, and lets
the indexer find what changed, without parsing 10k YAML headers on every command.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NoteError
from .fsutil import connect_sqlite, quarantine, sqlite_tx
from .notes import Note, read_note
from .vault import AGENTS_DIR, CONVERSATIONS_DIR, CORE_MEMORY, MEMORY_DIR, Vault, walk_markdown

CATALOG_VERSION = 2
PARSED_KEEP_CHARS = 24 << 20  # note text kept parsed between the catalog refresh and the indexer
_SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, sha TEXT,
    kind TEXT, id TEXT, memory_key TEXT, status TEXT, layer TEXT, agent TEXT, task TEXT,
    content_hash TEXT, meta TEXT, problem TEXT
);
CREATE INDEX IF NOT EXISTS notes_id ON notes(id);
CREATE INDEX IF NOT EXISTS notes_key ON notes(memory_key);
CREATE INDEX IF NOT EXISTS notes_hash ON notes(content_hash);
CREATE INDEX IF NOT EXISTS notes_agent ON notes(agent, kind);
"""


def _setup(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    # A derived cache: losing its last transactions in a power cut only costs a re-read.
    db.execute("PRAGMA synchronous=OFF")
    db.executescript(_SCHEMA)
    # Rows are derived from the notes by `classify`; when its rules change, forget them all.
    if db.execute("PRAGMA user_version").fetchone()[0] != CATALOG_VERSION:
        with sqlite_tx(db):
            db.execute("DELETE FROM notes")
        db.execute(f"PRAGMA user_version = {CATALOG_VERSION}")


def _jsonable(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, str | int | float | bool):
        return v
    return str(v)


def classify(path: str, meta: dict[str, Any]) -> tuple[str, str, str, str]:
    """(kind, layer, agent, task) of a note, from where it lives and its frontmatter."""
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
    elif parts[0] == "Operations":
        kind = "operational"
    elif path.startswith(CONVERSATIONS_DIR + "/"):
        kind = "conversation"
        if len(parts) > 3:
            agent = agent or parts[2]
    elif meta.get("id") and meta.get("type") and (
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

    @property
    def title(self) -> str:
        t = self.meta.get("title")
        return str(t) if t else self.path.rsplit("/", 1)[-1].removesuffix(".md")


def _entry(row: tuple, with_meta: bool) -> Entry:
    meta = json.loads(row[12] or "{}") if with_meta else {}
    return Entry(*(row[:12] + (meta, row[13])))


class Catalog:
    def __init__(self, vault: Vault, *, max_note_bytes: int = 5 * 1024 * 1024, db_path: Path | None = None) -> None:
        self.vault = vault
        self.max_note_bytes = max_note_bytes
        vault.state.mkdir(parents=True, exist_ok=True)
        self.path = db_path or vault.state / "catalog.sqlite"
        self.parsed: dict[str, Note] = {}
        self._parsed_chars = 0
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
            with sqlite_tx(self.db):
                self.db.executemany("INSERT OR REPLACE INTO notes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
                self.db.executemany("DELETE FROM notes WHERE path = ?", [(p,) for p in removed])
        return {"added": added, "changed": changed, "removed": removed}

    def _row(self, rel: str, mtime_ns: int, size: int) -> tuple:
        try:
            note = read_note(self.vault.root / rel, rel, max_bytes=self.max_note_bytes)
        except NoteError as e:
            return (rel, mtime_ns, size, "", "broken", "", "", "", "", "", "", "", "{}", e.problem)
        # Kept for the indexer, which would otherwise parse the same bytes again right after; up to
        # a budget, past which it re-parses (a 100k rebuild held 215 MB of parsed notes here).
        if self._parsed_chars < PARSED_KEEP_CHARS:
            self.parsed[rel] = note
            self._parsed_chars += len(note.body)
        return self._note_row(note, mtime_ns, size)

    def _note_row(self, note: Note, mtime_ns: int, size: int) -> tuple:
        meta = _jsonable(note.meta)
        kind, layer, agent, task = classify(note.path, note.meta)
        status = str(meta.get("status") or ("active" if kind == "memory" else ""))
        return (
            note.path, mtime_ns, size, note.raw_sha256, kind, str(meta.get("id") or ""), str(meta.get("memory_key") or ""),
            status, layer, agent, task, str(meta.get("content_hash") or ""), json.dumps(meta, ensure_ascii=False), note.problem,
        )

    def select(self, where: str = "1=1", args: tuple = (), *, with_meta: bool = True) -> list[Entry]:
        """Entries matching an SQL condition on the `notes` table (columns in `_SCHEMA`)."""
        return [_entry(r, with_meta) for r in self.db.execute(f"SELECT * FROM notes WHERE {where}", args)]

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
        self.db.execute("INSERT OR REPLACE INTO notes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", self._note_row(note, mtime_ns, size))

    def all(self) -> list[Entry]:
        return self.select()

    def by_id(self, memory_id: str) -> Entry | None:
        rows = self.select("id = ?", (memory_id,))
        return rows[0] if rows else None

    def by_key(self, key: str) -> list[Entry]:
        return self.select("memory_key = ? AND kind = 'memory'", (key,))

    def by_content_hash(self, h: str) -> list[Entry]:
        return self.select("content_hash = ? AND kind = 'memory'", (h,))

    def memories(self) -> list[Entry]:
        return self.select("kind = 'memory'")

    def problems(self) -> list[Entry]:
        return self.select("problem IS NOT NULL")
