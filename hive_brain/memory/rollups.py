"""Roll-ups: a long run of one-note-per-run memories (one per paper trade, per nightly job, per
deploy) replaced by one summary note, the run's notes kept as its history.

What makes a run (each rule with its reason):

- **One scope.** Notes of one layer, agent and task (and one type) only: a run of an agent's private
  notes becomes a private summary of that agent, never shared memory, and the owner's shared runs stay
  shared. An agent rolls up only its own private and task notes; the owner, every scope.
- **One pattern.** The words of the memory key (when it was set, not derived from the title) or else
  of the title, up to the first token holding a digit: ``trade:paper:0042`` -> ``trade paper``,
  "Paper trade 2026-11-03 AAPL" -> ``paper trade``. A digit is what a per-run note's name has and a
  topic note's usually lacks (a run number, a date); ``--prefix`` names a key prefix instead, for runs
  named without one.
- **Long.** At least ``MIN_RUN`` (10) notes: fewer are notes, not a log crowding recall.
- **Never** the user's instructions, preferences or decisions (an ADR series is not a run log), a
  private override (rolling it up would end the override), a sync copy, a broken note, or a summary.

A note that can be read but not rewritten (saved in a legacy encoding) is left as it is and listed
under ``skipped``. The run's notes are not deleted or archived out of reach: each gets ``status: superseded``,
``superseded_by`` and ``rolled_up_into`` naming the summary, the same shape as an evolve. So ``get``
reads each (with its chain), recall resolves a hit on one to the summary, a history question
("what did we trade previously") finds the note itself, and ``replay`` of an earlier generation sees
the notes as they were. ``archived`` would hide them from every recall, history mode included.

A pattern that already has a summary in the scope (its key ``rollup/<type>/<pattern>``) is extended:
the new summary evolves the old one and lists both runs. Everything is one unit of work: one journaled
transaction, one generation. Dry run by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import NoteError, UsageError
from ..store.catalog import Entry
from ..store.notes import (
    content_hash,
    derive_memory_key,
    memory_filename,
    new_memory_id,
    now_iso,
    render,
    slugify,
    wikilink,
)
from ..store.secrets import scrub
from .layers import AGENT_LAYERS, PROTECTED_TYPES, require_owner
from .store import MAX_CONTENT_CHARS, MemoryStore, UnitOfWork

MIN_RUN = 10
ORIGIN = "consolidate"
EXCERPT_CHARS = 160
MAX_IDS_SHOWN = 20
_SEP = re.compile(r"[\s._:/#+@,;()\[\]{}|'\"-]+")
_ENTRY = re.compile(r"^- ")


def run_pattern(text: str) -> str | None:
    """The words of ``text`` before its first token holding a digit; None without such a token."""
    head: list[str] = []
    for tok in (t for t in _SEP.split(text.lower()) if t):
        if any(c.isdigit() for c in tok):
            return " ".join(head) or None
        head.append(tok)
    return None


def _pattern_of(e: Entry) -> tuple[str, str] | None:
    """(basis, pattern) of a memory: its own key when set by hand, else its title."""
    mtype = str(e.meta.get("type") or "")
    key = e.memory_key
    if key and key != derive_memory_key(mtype, e.title, e.meta.get("project")):
        p = run_pattern(key)
        if p:
            return "key", p
    p = run_pattern(e.title)
    return ("title", p) if p else None


def _when(e: Entry) -> str:
    return str(e.meta.get("created") or e.meta.get("updated") or e.meta.get("date") or "")


@dataclass
class Run:
    layer: str
    agent: str
    task: str
    type: str
    basis: str  # key | title | prefix
    pattern: str
    members: list[Entry] = field(default_factory=list)

    @property
    def summary_key(self) -> str:
        return f"rollup/{slugify(self.type, 20)}/{slugify(self.pattern, 60)}"

    def describe(self) -> dict[str, Any]:
        ms = self.members
        return {"pattern": self.pattern, "basis": self.basis, "type": self.type, "layer": self.layer,
                "agent": self.agent or None, "task": self.task or None, "count": len(ms),
                "first": _when(ms[0]), "last": _when(ms[-1]), "summaryKey": self.summary_key,
                "memoryIds": [e.id for e in ms[:MAX_IDS_SHOWN]],
                "paths": [e.path for e in ms[:MAX_IDS_SHOWN]]}


def find_runs(store: MemoryStore, *, min_run: int = MIN_RUN, prefix: str | None = None) -> list[Run]:
    """The runs the caller may roll up (catalog already refreshed), oldest member first."""
    if min_run < 2:
        raise UsageError(f"--min-run {min_run} is too small", hint="a run needs at least 2 notes (default 10)")
    agent = store.agent
    where = ("kind = 'memory' AND status = 'active' AND problem IS NULL AND copy_of = ''")
    args: tuple = ()
    if agent:
        where += f" AND agent = ? AND layer IN ({','.join('?' * len(AGENT_LAYERS))})"
        args = (agent, *AGENT_LAYERS)
    prefix = (prefix or "").strip().lower() or None
    runs: dict[tuple[str, ...], Run] = {}
    for e in store.catalog.select(where, args):
        m = e.meta
        mtype = str(m.get("type") or "").lower()
        if mtype in PROTECTED_TYPES or m.get("overrides") or m.get("rollup_of"):
            continue
        if prefix:
            if not e.memory_key.lower().startswith(prefix):
                continue
            basis, pattern = "prefix", prefix
        else:
            found = _pattern_of(e)
            if found is None:
                continue
            basis, pattern = found
        k = (e.layer, e.agent, e.task, mtype, basis, pattern)
        runs.setdefault(k, Run(e.layer, e.agent, e.task, mtype, basis, pattern)).members.append(e)
    out = []
    for r in runs.values():
        if len(r.members) >= min_run:
            r.members.sort(key=lambda e: (_when(e), e.id))
            out.append(r)
    return sorted(out, key=lambda r: (r.layer, r.agent, r.task, r.type, r.pattern))


def _entry_line(e: Entry, body: str, excerpt_chars: int) -> str:
    first = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    first = " ".join(scrub(first, path=e.path).split())
    if len(first) > excerpt_chars:
        first = first[: max(0, excerpt_chars - 1)].rstrip() + "…"
    line = f"- {_when(e)[:10]} {e.title} (`{e.id}`)"
    return line + (f": {first}" if first and excerpt_chars > 0 else "")


def _summary_body(run: Run, new_lines: list[str], old_lines: list[str], first: str, last: str,
                  previous: str | None) -> str:
    n = len(old_lines) + len(new_lines)
    head = [f"Roll-up of {n} `{run.type}` notes matching \"{run.pattern}\" ({first[:10]} .. {last[:10]}), "
            "written by `hive-brain consolidate --apply-rollups`.",
            "Each note is kept as history (status superseded, `rolled_up_into` this note): "
            "`hive-brain get <id>` reads it, and a history question finds it.", ""]
    if previous:
        head.insert(2, f"It extends the earlier roll-up `{previous}`.")
    lines = old_lines + new_lines
    budget = int(MAX_CONTENT_CHARS * 0.95) - sum(len(h) + 1 for h in head)
    kept: list[str] = []
    used = 0
    for ln in reversed(lines):  # the newest are kept when the list would pass the content limit
        if used + len(ln) + 1 > budget:
            break
        kept.append(ln)
        used += len(ln) + 1
    kept.reverse()
    if len(kept) < len(lines):
        head.append(f"({len(lines) - len(kept)} older notes are not listed here; each still names this "
                    "roll-up in `rolled_up_into`.)")
    return "\n".join(head + kept) + "\n"


def _stage_run(tx: UnitOfWork, store: MemoryStore, run: Run) -> dict[str, Any]:
    cat = tx.catalog
    notes = []
    skipped: list[dict[str, Any]] = []
    for e in run.members:
        try:
            notes.append((e, tx.load(e)))
        except NoteError as err:  # e.g. saved in a legacy encoding: read, never rewritten; it stays as it is
            skipped.append({"id": e.id, "path": e.path, "reason": err.message})
    if len(notes) < 2:
        return {**run.describe(), "summary": None, "skipped": skipped}
    run.members = [e for e, _n in notes]
    old = next((e for e in cat.by_key(run.summary_key)
                if e.status == "active" and e.layer == run.layer and e.agent == run.agent and e.task == run.task),
               None)
    old_lines: list[str] = []
    old_meta: dict[str, Any] = {}
    old_note = None
    if old is not None:
        old_note = tx.load(old)
        old_meta = dict(old_note.meta)
        old_lines = [ln for ln in old_note.body.splitlines() if _ENTRY.match(ln)]
    # Excerpts only while the whole list fits the content limit (1,000 per-run notes do not, with them).
    bare = sum(len(_entry_line(e, "", 0)) + 1 for e, _n in notes) + sum(len(x) + 1 for x in old_lines)
    room = (int(MAX_CONTENT_CHARS * 0.9) - bare) // max(1, len(notes))
    excerpt = max(0, min(EXCERPT_CHARS, room - 2))
    new_lines = [_entry_line(e, n.body, excerpt) for e, n in notes]
    first = str(old_meta.get("rollup_first") or _when(run.members[0]))
    last = _when(run.members[-1])
    body = _summary_body(run, new_lines, old_lines, first, last, old.id if old else None)
    count = len(old_lines) + len(notes)
    mid = new_memory_id()
    ts = now_iso()
    title = f"Roll-up: {run.pattern} ({count} {run.type} notes)"[:300]
    meta: dict[str, Any] = {
        "id": mid, "type": run.type, "title": title, "memory_key": run.summary_key, "layer": run.layer,
        "agent": run.agent or None, "task": run.task or None,
        "project": _unanimous([e.meta.get("project") for e in run.members]),
        "tags": ["rollup"], "aliases": None, "confidence": None, "status": "active",
        "supersedes": wikilink(old.path, old.id) if old else None, "overrides": None, "origin": ORIGIN, "created": ts, "updated": ts,
        "content_hash": content_hash(body), "rollup_of": run.pattern, "rollup_basis": run.basis,
        "rollup_count": count, "rollup_first": first, "rollup_last": last,
    }
    folder = store._folder(run.layer, run.agent, run.task)
    path = f"{folder}/{memory_filename(title, mid)}"
    taken = set(tx.paths)
    while path in taken or store.vault.abs(path).exists():
        mid = new_memory_id()
        meta["id"] = mid
        path = f"{folder}/{memory_filename(title, mid)}"
    tx.write(path, render(meta, body), expect_old="")
    if old is not None and old_note is not None:
        done = {**old_meta, "status": "superseded", "superseded_by": wikilink(path, mid), "updated": ts}
        tx.write(old.path, render(done, old_note.body, like=old_note), expect_old=old.sha)
    for e, n in notes:
        m = {**n.meta, "status": "superseded", "superseded_by": wikilink(path, mid), "rolled_up_into": wikilink(path, mid),
             "updated": ts}
        tx.write(e.path, render(m, n.body, like=n), expect_old=e.sha)
    return {**run.describe(), "summary": {"id": mid, "path": path, "title": title, "extends": old.id if old else None,
                                          "count": count}, "skipped": skipped}


def _unanimous(values: list[Any]) -> Any:
    vals = {str(v) for v in values if v}
    return vals.pop() if len(vals) == 1 and all(values) else None


def rollups(store: MemoryStore, *, confirm: bool = False, min_run: int = MIN_RUN,
            prefix: str | None = None) -> dict[str, Any]:
    """Find (and, ``confirm``, apply in one unit of work) the roll-ups the caller may make."""
    if not store.agent:
        require_owner(store.settings, "rolling up memories")
    if not confirm:
        store.catalog.refresh()
        runs = find_runs(store, min_run=min_run, prefix=prefix)
        done = [r.describe() for r in runs]
    else:
        with store.transaction("consolidate: roll-ups") as tx:
            runs = find_runs(store, min_run=min_run, prefix=prefix)
            done = [_stage_run(tx, store, r) for r in runs]
    made = [r for r in done if not confirm or r.get("summary")]
    res: dict[str, Any] = {"dryRun": not confirm, "minRun": min_run, "prefix": prefix, "runs": done,
                           "notes": sum(r["count"] for r in made), "summaries": len(made)}
    if confirm and store.publish_error and runs:
        res["indexWarning"] = (f"saved, but the index did not update ({store.publish_error}); "
                               "it catches up on the next read")
    return res
