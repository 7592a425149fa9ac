"""Usage counts as ranking reads them: per memory, how often recalls retrieved it and answers used
it, and when last, kept current without parsing the usage log per query.

The log (``<state>/usage-events.jsonl`` and its ``.1``, :mod:`.operations`) holds up to 16 MB; a
recall needs the counts of its hundred-odd candidates. :class:`UsageTable` folds the log once and
then only the lines appended since (it remembers the live file's inode and how far it read). At a
rotation the live file it was reading becomes ``.1``: its counts become the old part and the new live
file is read from its start; anything else unexpected (two rotations between reads, a file replaced by
hand) folds the log again. The fold is also kept on disk,
``<state>/usage-table.json`` (derived, rebuildable, replaced atomically by whichever reader folded
more than ``SAVE_AFTER_BYTES`` since it was written), so a short process (the prompt hook without a
server, a CLI recall) starts from it and reads only the tail. Concurrent readers may each write it:
every copy is self-consistent (counts with the log position they cover), so the last one wins
harmlessly. A damaged copy is ignored and rebuilt.

A warm process asks :func:`table` for the state dir's one table; each query costs two ``stat``
calls while nothing was logged. Standard library only: the prompt hook imports this.

The ranking strength of a memory (``weight``) is in [0, 1]: log-scaled in ``retrieved + w_final *
final-answer`` uses, saturating at ``saturate`` weighted uses, halved every ``half_life_days`` since
its last use. What ranking does with it (a capped multiplier) is ``search.features``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import threading
from pathlib import Path
from typing import Any

USAGE_FILE = "usage-events.jsonl"  # = operations.USAGE_FILE (that module loads more than the hook needs)
TABLE_FILE = "usage-table.json"
TABLE_VERSION = 2
SAVE_AFTER_BYTES = 64 * 1024
KINDS = {"retrieved": 0, "final-answer": 1}

_tables: dict[str, UsageTable] = {}
_tables_lock = threading.Lock()


def _sig(st: os.stat_result | None) -> list[int] | None:
    return [st.st_ino, st.st_size] if st is not None else None


def _stat(p: Path) -> os.stat_result | None:
    try:
        return os.stat(p)
    except OSError:
        return None


def _epoch(ts: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError):
        return None


class UsageTable:
    """memory id -> [retrieved, final-answer, last use (unix seconds)], kept in two parts: ``old``
    (the rotated ``.1``) and ``new`` (the live file), so a rotation moves ``new`` to ``old`` instead of
    folding 16 MB again (the previous live file is the new ``.1``; what aged out was the old one)."""

    def __init__(self, state: Path) -> None:
        self.state = Path(state)
        self.live = self.state / USAGE_FILE
        self.rotated = self.state / (USAGE_FILE + ".1")
        self.path = self.state / TABLE_FILE
        self.old: dict[str, list[float]] = {}
        self.new: dict[str, list[float]] = {}
        self._rotated_sig: list[int] | None = None
        self._live_ino: int | None = None
        self._offset = 0
        self._unsaved = 0
        self._loaded = False
        self._lock = threading.Lock()
        # Bumped whenever the counts may have changed: what is derived from them (core memory's
        # "lessons answers keep using") is kept while it stays the same.
        self.version = 0

    @property
    def has_uses(self) -> bool:
        return bool(self.old or self.new)

    @property
    def counts(self) -> dict[str, list[float]]:
        """Both parts merged (a copy)."""
        out = {k: list(v) for k, v in self.old.items()}
        for k, v in self.new.items():
            c = out.get(k)
            out[k] = [c[0] + v[0], c[1] + v[1], max(c[2], v[2])] if c else list(v)
        return out

    # ------------------------------------------------------------------ reading the log
    def _fold(self, data: bytes, counts: dict[str, list[float]]) -> int:
        """Fold the whole lines of ``data`` into ``counts``; returns how many bytes that was (a line
        still being written waits for the next refresh)."""
        end = data.rfind(b"\n") + 1
        for raw in data[:end].split(b"\n"):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("kind") not in KINDS:
                continue
            col = KINDS[rec["kind"]]
            when = _epoch(str(rec.get("ts") or "")) or 0.0
            ids = rec.get("memory_ids")
            for mid in ids if isinstance(ids, list) else ():
                c = counts.setdefault(str(mid), [0, 0, 0.0])
                c[col] += 1
                c[2] = max(c[2], when)
        return end

    def _read_from(self, p: Path, offset: int) -> tuple[os.stat_result | None, bytes]:
        try:
            with open(p, "rb") as fh:
                st = os.fstat(fh.fileno())
                fh.seek(offset)
                return st, fh.read()
        except OSError:
            return None, b""

    def _rebuild(self) -> None:
        old: dict[str, list[float]] = {}  # built aside: a concurrent reader sees the old or the new
        new: dict[str, list[float]] = {}
        st, data = self._read_from(self.rotated, 0)
        self._fold(data, old)
        self._rotated_sig = _sig(st)
        st, data = self._read_from(self.live, 0)
        self._offset = self._fold(data, new)
        self.old, self.new = old, new
        self.version += 1
        self._live_ino = st.st_ino if st is not None else None
        self._unsaved = SAVE_AFTER_BYTES  # a rebuild is always worth keeping

    def _rotated_on(self, rot: os.stat_result) -> bool:
        """The live file we were reading became ``.1``: finish it and make it the old part. False
        when ``.1`` is some other file (two rotations since, or a copy put there): rebuild."""
        if self._live_ino is None or rot.st_ino != self._live_ino:
            return False
        st, data = self._read_from(self.rotated, self._offset)
        if st is None or st.st_ino != self._live_ino:
            return False
        new = {k: list(v) for k, v in self.new.items()}
        self._unsaved += self._fold(data, new) + SAVE_AFTER_BYTES
        self.old, self.new = new, {}
        self.version += 1
        self._rotated_sig, self._live_ino, self._offset = _sig(st), None, 0
        return True

    def _load_saved(self) -> None:
        try:
            doc = json.loads(self.path.read_bytes())
            if doc.get("version") != TABLE_VERSION:
                return
            old, new = ({str(k): [int(v[0]), int(v[1]), float(v[2])] for k, v in doc[part].items()}
                        for part in ("old", "new"))
            rotated, ino, offset = doc["rotated"], doc["liveIno"], int(doc["offset"])
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            return  # absent or damaged: derived, so rebuilt from the log
        self.old, self.new, self._rotated_sig, self._live_ino, self._offset = old, new, rotated, ino, offset
        self.version += 1

    def _save(self) -> None:
        doc = {"version": TABLE_VERSION, "rotated": self._rotated_sig, "liveIno": self._live_ino,
               "offset": self._offset, "old": self.old, "new": self.new}
        tmp = self.path.with_name(f"{TABLE_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(json.dumps(doc, separators=(",", ":")).encode())
            os.replace(tmp, self.path)  # not fsynced: a lost copy is rebuilt from the log
            self._unsaved = 0
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass

    def refresh(self) -> None:
        """Bring the counts up to the log as it is now (two stats when nothing changed)."""
        with self._lock:
            if not self._loaded:
                self._load_saved()
                self._loaded = True
            rot, live = _stat(self.rotated), _stat(self.live)
            if live is None and rot is None:
                if self.has_uses or self._offset:
                    self.old, self.new, self._rotated_sig, self._live_ino, self._offset = {}, {}, None, None, 0
                    self.version += 1
                return
            if _sig(rot) != self._rotated_sig and (rot is None or not self._rotated_on(rot)):
                self._rebuild()
            if live is not None:
                if self._live_ino is None and self._offset == 0:
                    self._live_ino = live.st_ino  # a live file begun since (after a rotation, or the first)
                if live.st_ino != self._live_ino or live.st_size < self._offset:
                    self._rebuild()
                elif live.st_size > self._offset:
                    st, data = self._read_from(self.live, self._offset)
                    if st is None or st.st_ino != self._live_ino:
                        self._rebuild()  # rotated between the stat and the open: the next refresh is exact
                    else:
                        n = self._fold(data, self.new)
                        self.version += 1
                        self._offset += n
                        self._unsaved += n
            if self._unsaved >= SAVE_AFTER_BYTES:
                self._save()

    # ------------------------------------------------------------------ what ranking reads
    def weight(self, memory_id: str, params: Any, now: float) -> float:
        """The memory's usage strength in [0, 1] (0: never used, as far as this device's log goes)."""
        a, b = self.old.get(memory_id), self.new.get(memory_id)
        if a is None and b is None:
            return 0.0
        c = [(a[0] if a else 0) + (b[0] if b else 0), (a[1] if a else 0) + (b[1] if b else 0),
             max(a[2] if a else 0.0, b[2] if b else 0.0)]
        uses = c[0] + params["usage_final"] * c[1]
        if uses <= 0:
            return 0.0
        strength = min(1.0, math.log1p(uses) / math.log1p(params["usage_saturate"]))
        age_days = max(0.0, now - c[2]) / 86400.0
        return strength * 0.5 ** (age_days / params["usage_half_life_days"])


def table(state: Path) -> UsageTable:
    """The state dir's table in this process, brought up to date with its log."""
    key = str(state)
    with _tables_lock:
        t = _tables.get(key)
        if t is None:
            t = _tables[key] = UsageTable(Path(state))
    t.refresh()
    return t
