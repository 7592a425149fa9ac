"""Versioned, content-addressed, verified index generations.

A generation says "which notes, with which content, indexed how". Note bytes live once in an
object store keyed by SHA-256 (``objects.sqlite``: one file, so a rebuild of 10k notes is one
transaction instead of 10k file creations; every read re-verifies the hash). A generation file is either a *checkpoint* (the full
``path -> sha`` manifest) or a *delta* against its parent (added/changed/removed). Each file
carries a SHA-256 receipt over its canonical JSON body; ``current`` (a one-line pointer) is moved
last, only to a generation whose receipt verifies. If ``current`` is damaged, readers fall back to
the newest older generation that verifies, and say so.

``notes_hash`` is the content hash of the full manifest: the same notes give the same hash, on any
device, whatever the history (rebuild after deleting the state dir → same ``notes_hash``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GenerationCorrupt, NotFound
from ..store.fsutil import (
    atomic_write_bytes,
    atomic_write_text,
    connect_sqlite,
    fsync_dir,
    quarantine,
    sha256_bytes,
    sqlite_tx,
)

# A note with a secret is stored scrubbed (store.secrets), under the hash of the bytes on disk (the
# manifest's): the object then starts with this line, which carries the hash of what follows.
REDACTED_MAGIC = b"hive-brain redacted object sha256="
CHECKPOINT_EVERY = 50  # deltas between checkpoints: bounds the cost of materialising a manifest
FORMAT = 1


def _setup_objects(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA secure_delete=ON")  # a raw object replaced by its scrubbed one is gone
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'objects'").fetchone() is None:
        from ..store.secrets import RULES_VERSION

        db.execute("CREATE TABLE objects (sha TEXT PRIMARY KEY, data BLOB)")
        # A new store holds only what put_objects stores, scrubbed by these rules already: nothing
        # for scrub_stored to redo (it re-scanned every object of a first rebuild, a third of its time).
        db.execute(f"PRAGMA user_version = {int(RULES_VERSION)}")


def canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def seal(body: dict) -> bytes:
    """File bytes of a receipted document: the SHA-256 of the canonical body, a newline, the body.
    Verifying is then one hash over the stored bytes — no re-serialising a large manifest."""
    data = canonical(body)
    return sha256_bytes(data).encode("ascii") + b"\n" + data


def unseal(raw: bytes) -> dict:
    """The body of a sealed document; ValueError if the receipt does not match."""
    receipt, sep, data = raw.partition(b"\n")
    if not sep or sha256_bytes(data).encode("ascii") != receipt.strip():
        raise ValueError("receipt mismatch")
    body = json.loads(data)
    if not isinstance(body, dict):
        raise ValueError("not a generation body")
    return body


def manifest_hash(manifest: dict[str, str]) -> str:
    return sha256_bytes("".join(f"{p}\t{manifest[p]}\n" for p in sorted(manifest)).encode("utf-8"))


@dataclass
class Generation:
    id: int
    kind: str  # checkpoint | delta
    parent: int | None
    created: str
    notes_hash: str
    note_count: int
    index: dict[str, Any]
    label: str
    added: dict[str, str] = field(default_factory=dict)
    changed: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    entries: dict[str, str] | None = None  # checkpoints only
    delta_counts: dict[str, int] | None = None  # checkpoints: what changed against the parent

    def summary(self) -> dict:
        return {
            "id": self.id, "kind": self.kind, "parent": self.parent, "created": self.created, "label": self.label,
            "notesHash": self.notes_hash, "notes": self.note_count,
            **(self.delta_counts or {"added": len(self.added), "changed": len(self.changed), "removed": len(self.removed)}),
            "index": self.index,
        }


class GenerationStore:
    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "generations"
        self.gens = self.root / "gens"
        self._conn: sqlite3.Connection | None = None
        self.warnings: list[str] = []
        self._manifest_cache: dict[int, dict[str, str]] = {}
        # gid -> deltas since its checkpoint, known from materialising or publishing it: publishing the
        # next one then needs no walk back through up to CHECKPOINT_EVERY files (each read and hashed).
        self._depth: dict[int, int] = {}
        self.objects_reset = False  # the object store was found damaged and started afresh

    # -- objects ------------------------------------------------------------------------------
    @property
    def objects_path(self) -> Path:
        return self.root / "objects.sqlite"

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            # A damaged store is moved aside and started empty: the objects of the current
            # generation are then missing, so the indexer re-stores them all (see objects_reset).
            self._conn, reset = connect_sqlite(self.objects_path, _setup_objects, timeout=30)
            self.objects_reset = self.objects_reset or reset
        return self._conn

    def reset_objects(self, problem: str) -> None:
        """The object store is damaged (found by a check or a query): move it aside, start empty."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        quarantine(self.objects_path, problem)
        self.objects_reset = True

    @staticmethod
    def redacted_object(clean: bytes) -> bytes:
        """The stored form of a note whose secrets were scrubbed (``clean``), verifiable on read."""
        return REDACTED_MAGIC + sha256_bytes(clean).encode("ascii") + b"\n" + clean

    def put_objects(self, items: dict[str, bytes]) -> None:
        """Store note bodies by sha256 (idempotent). One transaction: a rebuild writes thousands.
        A scrubbed object replaces what is stored under its hash (an unscrubbed copy from before)."""
        if not items:
            return
        plain = [(k, v) for k, v in items.items() if not v.startswith(REDACTED_MAGIC)]
        scrubbed = [(k, v) for k, v in items.items() if v.startswith(REDACTED_MAGIC)]
        try:
            with sqlite_tx(self._db):
                self._db.executemany("INSERT OR IGNORE INTO objects VALUES (?, ?)", plain)
                self._db.executemany("INSERT OR REPLACE INTO objects VALUES (?, ?)", scrubbed)
        except sqlite3.DatabaseError as e:
            self.reset_objects(str(e))

    def scrub_stored(self) -> int | None:
        """Once per detector version (``store.secrets.RULES_VERSION``): scrub every object stored
        before it, those of older generations included, so replaying history never reads a secret
        either. Returns how many objects were rewritten. (Objects carry no path, so the Secure-notes
        rule, which needs one, applies from the next index of each note.) None: already done."""
        from ..store.secrets import RULES_VERSION, scrub_bytes

        if self._db.execute("PRAGMA user_version").fetchone()[0] == RULES_VERSION:
            return None
        out: dict[str, bytes] = {}
        for sha, data in self._db.execute("SELECT sha, data FROM objects"):
            data = bytes(data)
            if not data.startswith(REDACTED_MAGIC) and (clean := scrub_bytes(data)) is not data:
                out[sha] = self.redacted_object(clean)
        self.put_objects(out)
        self._db.execute(f"PRAGMA user_version = {int(RULES_VERSION)}")
        return len(out)

    def truncate_wal(self) -> None:
        """Fold the WAL into the store and empty it: after a full pass that replaced unscrubbed objects
        (an index from before secrets were scrubbed), no old page stays behind in the WAL file.
        Best effort: a reader holding a snapshot makes SQLite skip it (the next full pass retries)."""
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def get_object(self, sha: str) -> bytes:
        try:
            row = self._db.execute("SELECT data FROM objects WHERE sha = ?", (sha,)).fetchone()
        except sqlite3.DatabaseError as e:
            raise GenerationCorrupt(f"the object store is damaged ({e})", hint="run `hive-brain rebuild-index`") from e
        if row is None:
            raise GenerationCorrupt(f"object {sha[:12]} is missing from the store", hint="run `hive-brain rebuild-index`")
        data = bytes(row[0])
        if data.startswith(REDACTED_MAGIC):
            receipt, _, clean = data[len(REDACTED_MAGIC):].partition(b"\n")
            if sha256_bytes(clean).encode("ascii") == receipt:
                return clean
        if sha256_bytes(data) != sha:
            raise GenerationCorrupt(f"object {sha[:12]} is damaged", hint="run `hive-brain rebuild-index`")
        return data

    # -- generation files ---------------------------------------------------------------------
    def _gen_path(self, gid: int) -> Path:
        return self.gens / f"{gid:08d}.json"

    def ids(self) -> list[int]:
        # Every write publishes a generation and nothing prunes them unasked, so this folder only grows
        # (712 files in a 10k-note vault after a benchmark's writes); a write lists it up to three times.
        # Names, not Path objects: 0.6 ms instead of 1.6 ms at 712 files.
        try:
            names = os.listdir(self.gens)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def load(self, gid: int) -> Generation:
        p = self._gen_path(gid)
        try:
            body = unseal(p.read_bytes())
        except FileNotFoundError as e:
            raise NotFound(f"no generation {gid}", hint="list them with `hive-brain generations`") from e
        except (OSError, ValueError) as e:
            raise GenerationCorrupt(f"generation {gid} is unreadable or fails its receipt check") from e
        return Generation(**{k: body[k] for k in Generation.__dataclass_fields__ if k in body})

    def verify(self, gid: int) -> bool:
        try:
            self.manifest(gid)
            return True
        except (GenerationCorrupt, NotFound):
            return False

    def manifest(self, gid: int) -> dict[str, str]:
        """The full path->sha manifest at a generation (verifying every file on the way)."""
        if gid in self._manifest_cache:
            return dict(self._manifest_cache[gid])
        chain: list[Generation] = []
        cur: int | None = gid
        while cur is not None:
            g = self.load(cur)
            chain.append(g)
            if g.kind == "checkpoint":
                break
            cur = g.parent
        else:
            if not chain or chain[-1].kind != "checkpoint":
                raise GenerationCorrupt(f"generation {gid} has no checkpoint to start from")
        man: dict[str, str] = dict(chain[-1].entries or {})
        for g in reversed(chain[:-1]):
            for p in g.removed:
                man.pop(p, None)
            man.update(g.added)
            man.update(g.changed)
        if manifest_hash(man) != chain[0].notes_hash:
            raise GenerationCorrupt(f"generation {gid}: manifest does not match its notes hash")
        self._manifest_cache = {gid: man}
        self._depth = {gid: len(chain) - 1}
        return dict(man)

    # -- current ------------------------------------------------------------------------------
    def pointer(self) -> int | None:
        """What `current` says, unverified: for the prompt hook, which reads the lexical index
        (kept in step with `current`) and must not spend its budget re-hashing manifests."""
        try:
            return int((self.root / "current").read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None

    def _warn(self, message: str) -> None:
        # current_id runs several times per command (the catch-up, its publish, the view): one warning each.
        if message not in self.warnings:
            self.warnings.append(message)

    def current_id(self) -> int | None:
        """The newest verified generation at or below `current` (falls back and warns if damaged)."""
        ptr = self.root / "current"
        wanted: int | None = None
        try:
            wanted = int(ptr.read_text(encoding="utf-8").strip())
        except FileNotFoundError:
            wanted = None
        except (OSError, ValueError):
            self._warn("the `current` pointer is damaged; using the newest verified generation")
        ids = self.ids()
        if wanted is None and not ids:
            return None
        candidates = [i for i in ids if wanted is None or i <= wanted]
        for gid in reversed(candidates):
            if self.verify(gid):
                if wanted is not None and gid != wanted:
                    self._warn(
                        f"generation {wanted} is damaged; reading the newest verified generation {gid} instead "
                        "(run `hive-brain rebuild-index` to repair)"
                    )
                return gid
        if ids:
            self._warn("no generation verifies; run `hive-brain rebuild-index`")
        return None

    def publish(self, new_manifest: dict[str, str], *, index: dict[str, Any], label: str, force_checkpoint: bool = False) -> Generation:
        """Write a generation for `new_manifest`, verify it, then move `current` to it (last)."""
        self.gens.mkdir(parents=True, exist_ok=True)
        base_id = self.current_id()
        base = self.manifest(base_id) if base_id is not None else {}
        ids = self.ids()
        gid = (ids[-1] + 1) if ids else 1
        known = self._depth.get(base_id) if base_id is not None else 0
        deltas_since_cp = 0 if known is None else known
        cur = base_id if known is None else None
        while cur is not None:
            g = self.load(cur)
            if g.kind == "checkpoint":
                break
            deltas_since_cp += 1
            cur = g.parent
        added = {p: s for p, s in new_manifest.items() if p not in base}
        changed = {p: s for p, s in new_manifest.items() if p in base and base[p] != s}
        removed = sorted(p for p in base if p not in new_manifest)
        checkpoint = force_checkpoint or base_id is None or deltas_since_cp + 1 >= CHECKPOINT_EVERY
        body: dict[str, Any] = {
            "format": FORMAT,
            "id": gid,
            "kind": "checkpoint" if checkpoint else "delta",
            "parent": base_id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "notes_hash": manifest_hash(new_manifest),
            "note_count": len(new_manifest),
            "index": index,
            "label": label,
            "added": added,
            "changed": changed,
            "removed": removed,
        }
        if checkpoint:
            body["entries"] = dict(sorted(new_manifest.items()))
        if checkpoint:
            # A checkpoint lists every note already; repeating them as "added" would double its size.
            body["delta_counts"] = {"added": len(added), "changed": len(changed), "removed": len(removed)}
            body["added"], body["changed"], body["removed"] = {}, {}, []
        atomic_write_bytes(self._gen_path(gid), seal(body))
        # Verify before pointing at it: re-read the file (receipt) and replay it onto the base,
        # which was verified above — re-materialising from the checkpoint would cost O(vault).
        g = self.load(gid)
        man = dict(g.entries or {}) if g.kind == "checkpoint" else {
            **{p: s for p, s in base.items() if p not in set(g.removed)}, **g.added, **g.changed}
        # Equal manifests hash alike, so comparing the stored hash with the one computed above is enough
        # (hashing 10k entries again cost each one-note write ~8 ms).
        if man != new_manifest or g.notes_hash != body["notes_hash"]:
            raise GenerationCorrupt(f"generation {gid} did not verify after writing")
        self._manifest_cache = {gid: man}
        self._depth = {gid: 0 if checkpoint else deltas_since_cp + 1}
        from ..store.journal import crash_point  # here: readers import this module, not the writer side

        crash_point("generation-before-current")
        atomic_write_text(self.root / "current", f"{gid}\n")
        fsync_dir(self.root)
        return g

    def list(self) -> list[dict]:
        out = []
        for gid in self.ids():
            try:
                out.append({**self.load(gid).summary(), "verified": True})
            except GenerationCorrupt as e:
                out.append({"id": gid, "verified": False, "problem": str(e)})
        return out

    # -- pruning ------------------------------------------------------------------------------
    def coverage_path(self) -> Path:
        return self.root / "coverage.json"

    def read_coverage(self) -> dict | None:
        p = self.coverage_path()
        if not p.exists():
            return None
        try:
            return unseal(p.read_bytes())
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise GenerationCorrupt(f"coverage.json is damaged ({e}); pruning is paused",
                                    hint="run `hive-brain rebuild-index` (it writes it anew)") from e

    def repair_coverage(self) -> dict | None:
        """A damaged coverage.json (pruning pauses on it, as DESIGN asks) kept aside, listed by status
        and doctor, and written anew from the generations on disk: what ``rebuild-index`` does, so the
        advice the pause gives is the way out (before, nothing ever touched the file again)."""
        try:
            return self.read_coverage()
        except GenerationCorrupt as e:
            quarantine(self.coverage_path(), str(e.__cause__ or e), fate="rebuilt from the generations on disk")
        ids = [i for i in self.ids() if self.verify(i)]
        body = {"earliest_replayable": ids[0] if ids else None, "current": self.current_id(), "kept": ids,
                "pruned": [], "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "rebuilt": "from the generations on disk (the last prune's record was damaged)"}
        atomic_write_bytes(self.coverage_path(), seal(body))
        return body

    def earliest_replayable(self) -> int | None:
        ids = [i for i in self.ids() if self.verify(i)]
        return ids[0] if ids else None

    def prune(self, keep_last: int = 20) -> dict:
        """Drop old generations, keeping the newest `keep_last` and a checkpoint they all rest on."""
        self.read_coverage()  # raises (pauses pruning) if coverage data is damaged
        cur = self.current_id()
        if cur is None:
            return {"removed": [], "kept": []}
        ids = [i for i in self.ids() if i <= cur]
        keep = set(ids[-keep_last:])
        oldest_kept = min(keep)
        if self.load(oldest_kept).kind != "checkpoint":
            # Re-root the oldest kept generation as a checkpoint so it stays replayable alone.
            man = self.manifest(oldest_kept)
            g = self.load(oldest_kept)
            body = {**{k: getattr(g, k) for k in Generation.__dataclass_fields__ if k != "entries"}, "format": FORMAT,
                    "kind": "checkpoint", "entries": dict(sorted(man.items()))}
            atomic_write_bytes(self._gen_path(oldest_kept), seal(body))
            self._manifest_cache, self._depth = {}, {}
        removed = [i for i in self.ids() if i not in keep and i < oldest_kept]
        for gid in removed:
            self._gen_path(gid).unlink(missing_ok=True)
        # Objects no longer referenced by any kept generation.
        live: set[str] = set()
        for gid in sorted(keep):
            live.update(self.manifest(gid).values())
        dead = [(sha,) for (sha,) in self._db.execute("SELECT sha FROM objects") if sha not in live]
        with sqlite_tx(self._db):
            self._db.executemany("DELETE FROM objects WHERE sha = ?", dead)
        dropped = len(dead)
        body = {"earliest_replayable": oldest_kept, "current": cur, "kept": sorted(keep), "pruned": removed,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        atomic_write_bytes(self.coverage_path(), seal(body))
        return {"removed": removed, "kept": sorted(keep), "objectsRemoved": dropped, "earliestReplayable": oldest_kept}
