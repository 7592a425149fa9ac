"""Typed memory: remember / evolve / get / update / delete / batch, each one journaled transaction.

Truth changes go through ``evolve`` (new note + old marked superseded, linked both ways); wording
fixes go through ``update`` (in place). Every check that depends on other notes (active key taken,
identical content) runs while holding the vault lock, so two writers cannot both pass it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from typing import Any

from ..config import Settings
from ..errors import (
    ChainProtected,
    DuplicateContent,
    DuplicateKey,
    HiveBrainError,
    LockTimeout,
    NotConfirmed,
    NoteError,
    NotFound,
    PermissionDenied,
    Refused,
    UsageError,
)
from ..store import pending as pending_writes
from ..store.catalog import Catalog, Entry
from ..store.chain import versions
from ..store.journal import Transaction, write_session
from ..store.notes import (
    content_hash,
    derive_memory_key,
    linked_id,
    memory_filename,
    new_memory_id,
    now_iso,
    read_note,
    render,
    to_text_list,
    wikilink,
    written_id,
)
from ..store.secrets import check_secrets, scrub
from ..store.text import check_text
from ..store.vault import AGENTS_DIR, MEMORY_DIR, Vault
from .conflicts import for_entry
from .layers import check_override, enforced, may_open, require_owner, visible_from
from .model import MemoryInput, check_type, clean_confidence, question_list
from .proposals import stage_remember_proposal

# The writes that can be given as data (replayed from the pending queue, sent to the server).
WRITE_OPS = ("remember", "evolve", "update", "delete", "batch")
MAX_BATCH = 25
MAX_CONTENT_CHARS = 100_000
MAX_TITLE_CHARS = 300
Publish = Callable[[list[str]], None]


def walk_catalog(catalog: Catalog) -> bool:
    """The default catalog refresh of a unit of work: stat every note (returns True: nothing skipped)."""
    catalog.refresh()
    return True


def _deferrable(op: str) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
    """A write that cannot take the lock in time is kept as a durable pending write (replayed by the
    next writer with the same arguments and agent) and reported as ``{"status": "pending", "id"}``.
    Checks that need no lock (validation, secrets) have already refused bad input by then."""

    def deco(fn: Callable[..., dict]) -> Callable[..., dict]:
        @functools.wraps(fn)
        def wrapper(self: MemoryStore, *args: Any, **kwargs: Any) -> dict:
            try:
                return fn(self, *args, **kwargs)
            except LockTimeout as e:
                if self._replaying or not e.acquiring:
                    raise
                bound = inspect.signature(fn).bind(self, *args, **kwargs)
                bound.apply_defaults()
                call = {k: (asdict(v) if isinstance(v, MemoryInput) else v)
                        for k, v in bound.arguments.items() if k != "self"}
                return self.keep_pending(op, call, e.message)

        return wrapper

    return deco


def with_id(meta: dict[str, Any], memory_id: str) -> dict[str, Any]:
    """A copy of a note's frontmatter to rewrite it, carrying the id readers already know it by: a
    note made from the memory template has none (or a placeholder) until hive-brain first writes it."""
    out = dict(meta)
    if not written_id(out):
        out["id"] = memory_id
    return out


def check_input_secrets(inp: MemoryInput) -> None:
    check_secrets(title=inp.title, content=inp.content, tags=inp.tags, aliases=inp.aliases,
                  questions=inp.questions, project=inp.project,
                  memory_key=inp.memory_key, task=inp.task, overrides=inp.overrides, type=inp.type)
# What each write argument may be when it arrives as JSON (the socket): a wrong type is a UsageError
# naming it, never an AttributeError deep in a write.
_ARG_TYPES: dict[str, tuple[type, ...]] = {
    "memory_id": (str,), "content": (str, type(None)), "title": (str, type(None)), "tags": (list, type(None)),
    "project": (str, type(None)), "confidence": (int, float, type(None)), "status": (str, type(None)),
    "confirm": (bool,), "force": (bool,), "records": (list,), "inp": (MemoryInput,),
    "aliases": (list, type(None)), "questions": (list, type(None)),
}


def _check_arg_types(op: str, args: dict[str, Any]) -> None:
    for name, value in args.items():
        allowed = _ARG_TYPES.get(name, (object,))
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            want = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise UsageError(f"{op}: argument {name!r} must be {want}, not {type(value).__name__}")
        if name in ("tags", "aliases", "questions") and isinstance(value, list) and not all(isinstance(t, str) for t in value):
            raise UsageError(f"{op}: every value of {name!r} must be a string")


def check_sizes(title: str | None, content: str | None) -> None:
    """The one size limit of a memory's title and content (remember, evolve, batch and update)."""
    if title is not None and len(title) > MAX_TITLE_CHARS:
        raise UsageError(f"title is over {MAX_TITLE_CHARS} characters", hint="put detail in the content")
    if content is not None and len(content) > MAX_CONTENT_CHARS:
        raise UsageError(f"content is over {MAX_CONTENT_CHARS:,} characters", hint="split it into several memories")


class MemoryStore:
    def __init__(self, vault: Vault, settings: Settings, *, publish: Publish | None = None) -> None:
        self.vault = vault
        self.settings = settings
        self.publish = publish
        self.catalog = Catalog(vault, max_note_bytes=settings.max_note_bytes)
        self.publish_error: str | None = None
        self._replaying = False
        self._agent_stores: dict[tuple[str | None, bool, float], MemoryStore] = {}
        # How a unit of work brings the catalog up to date under the lock: by default a stat walk of the
        # whole vault (someone may have edited any note); the server, whose file watcher knows what
        # changed, passes one that re-reads only that (at 10k notes the walk was most of a write).
        self.refresh_catalog: Callable[[Catalog], bool] = walk_catalog
        self._partial = False  # this unit of work's catalog refresh re-read only what the watcher named

    # -- identity and layers -------------------------------------------------------------------
    @property
    def agent(self) -> str | None:
        return self.settings.agent_id

    def _proposes(self, inp: MemoryInput) -> bool:
        """An agent's shared write in enforcement mode becomes a Brain Review proposal."""
        return (inp.scope or "").lower() in ("hive", "shared") and enforced(self.settings)

    def _target_layer(self, inp: MemoryInput) -> tuple[str, str, str]:
        """(layer, agent, task) a new memory lands in."""
        scope = (inp.scope or "").lower() or None
        if scope in ("hive", "shared"):
            if self._proposes(inp):
                # Callers route these through _propose; reaching here would be a direct shared write.
                raise PermissionDenied(
                    f"agent {self.agent!r} may not write shared memory directly in enforcement mode",
                    hint="`remember --memory-scope hive` queues it for Brain Review",
                )
            return "shared", "", ""
        if scope not in (None, "private", "task"):
            raise UsageError(f"unknown memory scope {inp.scope!r}", hint="use hive, private or task")
        if not self.agent:
            if scope in ("private", "task"):
                raise UsageError("a private or task memory needs an agent id", hint="set HIVE_AGENT_ID")
            return "shared", "", ""
        if scope == "task" or inp.task:
            if not inp.task:
                raise UsageError("a task memory needs --task")
            return "task", self.agent, inp.task
        return "private", self.agent, ""

    def _folder(self, layer: str, agent: str, task: str) -> str:
        if layer == "shared":
            return MEMORY_DIR
        from ..store.notes import slugify

        if layer == "task":
            return f"{AGENTS_DIR}/{agent}/Tasks/{slugify(task, 60)}"
        return f"{AGENTS_DIR}/{agent}/Memory"

    def _same_scope(self, e: Entry, layer: str, agent: str, task: str) -> bool:
        return e.layer == layer and e.agent == agent and (layer != "task" or e.task == task)

    def _may_change(self, e: Entry) -> None:
        if not self.settings.scoped_permissions:
            return
        if not self.agent:
            require_owner(self.settings, f"changing {e.id}")
            return
        if e.layer == "shared" or e.agent != self.agent:
            raise PermissionDenied(
                f"agent {self.agent!r} may not change {e.id} ({e.layer} memory{' of ' + e.agent if e.agent else ''})",
                hint="only the owner (no HIVE_AGENT_ID) or the memory's own agent may change it",
            )

    # -- building notes ------------------------------------------------------------------------
    def _validate(self, inp: MemoryInput) -> None:
        inp.check()
        inp.type = inp.type.strip().lower()
        inp.title = " ".join(inp.title.split())
        if not inp.type or not inp.type.replace("-", "").replace("_", "").isalnum():
            raise UsageError(f"memory type {inp.type!r} is not a simple word", hint="e.g. preference, decision, lesson")
        if not inp.title:
            raise UsageError("title is empty")
        if not inp.content.strip():
            raise UsageError("content is empty")
        check_sizes(inp.title, inp.content)
        inp.confidence = clean_confidence(inp.confidence)
        check_input_secrets(inp)

    def _new_note(self, inp: MemoryInput, *, taken_paths: set[str], supersedes: str | None = None) -> tuple[str, dict, str]:
        layer, agent, task = self._target_layer(inp)
        mid = new_memory_id()
        ts = now_iso()
        meta: dict[str, Any] = {
            "id": mid,
            "type": inp.type,
            "title": inp.title,
            "memory_key": inp.memory_key or derive_memory_key(inp.type, inp.title, inp.project),
            "layer": layer,
            "agent": agent or None,
            "task": task or None,
            "project": inp.project or None,
            "tags": inp.tags or None,
            "aliases": inp.aliases or None,
            "questions": inp.questions or None,
            "confidence": inp.confidence,
            "status": "active",
            "supersedes": supersedes,
            "overrides": self._override_link(inp.overrides),
            "origin": inp.origin or ("agent" if self.agent else "user"),
            "created": ts,
            "updated": ts,
            "content_hash": content_hash(inp.content),
        }
        for k, v in (inp.provenance or {}).items():
            meta.setdefault(k, v)
        folder = self._folder(layer, agent, task)
        path = f"{folder}/{memory_filename(inp.title, mid)}"
        while path in taken_paths or self.vault.abs(path).exists():
            mid = new_memory_id()
            meta["id"] = mid
            path = f"{folder}/{memory_filename(inp.title, mid)}"
        taken_paths.add(path)
        return path, meta, render(meta, inp.content)

    def _override_link(self, overrides: str | None) -> str | None:
        """The shared memory a private one overrides, as a wikilink to its note (as the version links
        are written: Obsidian shows it); the id as given when no note has it (check_override says so)."""
        oid = str(linked_id((overrides or "").strip()) or "").strip()
        target = self.catalog.by_id(oid) if oid else None
        return wikilink(target.path, target.id) if target is not None else (oid or None)

    def _check_unique(self, meta: dict, *, ignore_ids: set[str], pending: list[dict],
                      check_overrides: bool = True) -> None:
        layer, agent, task = meta["layer"], meta.get("agent") or "", meta.get("task") or ""
        for e in self.catalog.by_key(meta["memory_key"]):
            if e.id in ignore_ids or e.status != "active" or not self._same_scope(e, layer, agent, task):
                continue
            raise DuplicateKey(
                f"an active memory already has key {meta['memory_key']!r}: {e.id} ({e.path})",
                hint=f"to change what it says, run `hive-brain evolve --memory-id {e.id} --content ...`",
            )
        for e in self.catalog.by_content_hash(meta["content_hash"]):
            if e.id in ignore_ids or e.status != "active" or not visible_from(e, layer, agent):
                continue
            raise DuplicateContent(f"the same content is already stored as {e.id} ({e.path})", hint="nothing to do")
        if meta.get("overrides") and check_overrides:
            check_override(self.catalog, str(linked_id(meta["overrides"])), layer=layer, agent=agent,
                           ignore_ids=frozenset(ignore_ids))
        for p in pending:
            if p["memory_key"] == meta["memory_key"] and p["layer"] == layer and (p.get("agent") or "") == agent:
                raise DuplicateKey(f"two records in this batch share key {meta['memory_key']!r}")
            if p["content_hash"] == meta["content_hash"]:
                raise DuplicateContent("two records in this batch have the same content")

    def _entry(self, memory_id: str) -> Entry:
        if not memory_id or not memory_id.strip():
            raise UsageError("memory id is empty")
        check_text(memory_id, "the memory id")
        e = self.catalog.by_id(memory_id.strip())
        if e is None and self._partial:
            # A note written by hand a moment ago whose file event has not reached the server yet.
            self.catalog.refresh()
            self._partial = False
            e = self.catalog.by_id(memory_id.strip())
        if e is None or e.kind != "memory" or not may_open(e, self.agent):
            raise NotFound(f"no memory with id {memory_id!r}", hint="find ids with `hive-brain recall ... --json`")
        if e.problem:
            raise NoteError(e.path, e.problem, hint="fix the note by hand; hive-brain never rewrites a broken note")
        return e

    def load(self, e: Entry, *, to_rewrite: bool = True) -> Any:
        """The parsed note behind ``e`` (NoteError when it cannot be read, or, ``to_rewrite``, when it
        may be read but not rewritten)."""
        note = read_note(self.vault.root / e.path, e.path, max_bytes=self.settings.max_note_bytes)
        if note.problem:
            raise NoteError(e.path, note.problem, hint="fix the note by hand; hive-brain never rewrites a broken note")
        if to_rewrite and note.extra.get("encoding", "utf-8") != "utf-8":
            # Read (and searchable) in its legacy encoding; rewriting it would change every byte.
            raise NoteError(e.path, f"is saved as {note.extra['encoding']}, not UTF-8; hive-brain reads it but "
                            "never rewrites it", hint="re-save it as UTF-8 in your editor to let hive-brain change it")
        return note

    @contextmanager
    def _session(self, command: str, timeout: float | None = None) -> Iterator[list[dict]]:
        held = ExitStack()
        try:
            recovered = held.enter_context(write_session(
                self.vault, timeout=self.settings.lock_timeout if timeout is None else timeout, command=command))
        except LockTimeout as e:
            e.acquiring = True  # only this one may turn a write into a pending one
            raise
        with held:
            if not self._replaying and pending_writes.has_queued(self.vault.state):
                self._replay_pending()
            yield recovered

    def apply_pending(self, *, timeout: float | None = None) -> list[dict]:
        """Apply the writes earlier commands left pending (for the server and ``doctor``; every write
        does it anyway); returns the records still kept (failed ones). Raises ``LockTimeout`` when
        the vault stays busy for ``timeout`` (default: the lock timeout): they stay pending."""
        if not pending_writes.has_queued(self.vault.state):
            return pending_writes.list_pending(self.vault.state)
        with self._session("apply pending writes", timeout):
            pass  # the session replays them on entry
        return pending_writes.list_pending(self.vault.state)

    def _replay_pending(self) -> None:
        """Apply writes that earlier commands left pending, oldest first (lock held). A refusal now
        (its key was taken meanwhile, its memory deleted) is kept as a failed record, never dropped."""
        for rec in pending_writes.queued(self.vault.state):
            # A record without an agent was queued by the owner: in enforcement mode only a proved owner
            # gets that far (store.identity.establish refuses anyone else up front), so it replays as one.
            store = self.for_agent(rec.get("agent"), owner_verified=not rec.get("agent"))
            store._replaying = True
            self._replaying = True
            try:
                res = store.call(rec["op"], rec.get("args") or {}, trusted=True)
            except DuplicateContent as e:
                # Already stored (e.g. this record was applied just before a crash): the intent holds.
                pending_writes.done(self.vault.state, rec, {"status": "already-stored", "note": e.message})
            except HiveBrainError as e:
                pending_writes.failed(self.vault.state, rec, f"{type(e).__name__}: {e.message}")
            except Exception as e:  # noqa: BLE001 - one bad record must not block every later write
                pending_writes.failed(self.vault.state, rec, f"{type(e).__name__}: {e}")
            else:
                pending_writes.done(self.vault.state, rec, res)
            finally:
                self._replaying = False
                store._replaying = False

    def keep_pending(self, op: str, call: dict[str, Any], reason: str) -> dict:
        """Keep the write ``op(**call)`` (arguments as data) as a durable pending write, applied by the
        next writer as this store's agent; the result every surface reports for it."""
        rec = pending_writes.add(self.vault.state, op, call, agent=self.agent, reason=reason)
        res = {"status": "pending", "id": rec["id"], "op": op,
               "message": f"{reason}; kept as pending write {rec['id']}, applied by the next write"}
        if "memory_id" in call:
            res["memoryId"] = call["memory_id"]
        return res

    def for_agent(self, agent: str | None, *, owner_verified: bool = False,
                  lock_timeout: float | None = None) -> MemoryStore:
        """This store acting for ``agent`` (kept, so a server writing for several agents reuses each).
        ``owner_verified`` only for a caller that proved it is the owner (see store.identity)."""
        wait = self.settings.lock_timeout if lock_timeout is None else lock_timeout
        if agent == self.agent and owner_verified == self.settings.owner_verified and wait == self.settings.lock_timeout:
            return self
        store = self._agent_stores.get((agent, owner_verified, wait))
        if store is None:
            if len(self._agent_stores) >= 256:  # callers choose agent ids and waits: keep the cache bounded
                self._agent_stores.clear()
            store = MemoryStore(self.vault, self.settings.replace(agent_id=agent, owner_verified=owner_verified,
                                                                  lock_timeout=wait), publish=self.publish)
            self._agent_stores[(agent, owner_verified, wait)] = store
        store.refresh_catalog = self.refresh_catalog
        return store

    def call(self, op: str, args: dict[str, Any], *, trusted: bool = False) -> dict:
        """Run a write given as data: a pending record being replayed (``trusted``: written by this
        code) or a request that came over the server's socket (checked like any caller input)."""
        if op not in WRITE_OPS:
            raise UsageError(f"unknown write {op!r}", hint="one of: " + ", ".join(WRITE_OPS))
        if not isinstance(args, dict):
            raise UsageError("write arguments must be a JSON object")
        args = dict(args)
        if "inp" in args:
            # A caller's record never carries provenance (only Brain Review sets it); a replayed
            # record may, since it was this store's own MemoryInput.
            args["inp"] = MemoryInput(**args["inp"]) if trusted else MemoryInput.from_dict(args["inp"])
        fn = getattr(self, op)
        try:
            inspect.signature(fn).bind(**args)
        except TypeError as e:
            raise UsageError(f"bad arguments for {op}: {e}") from None
        if not trusted:
            _check_arg_types(op, args)
        return fn(**args)

    def _commit(self, txn: Transaction, *, publish: bool = True) -> None:
        txn.commit(self.publish if publish else None)
        self.publish_error = txn.publish_error
        self.catalog.refresh(only=txn.paths)

    @contextmanager
    def transaction(self, label: str, *, timeout: float | None = None, publish: bool = True,
                    refresh: bool = True) -> Iterator[UnitOfWork]:
        """One unit of work: hold the vault lock, repair what a crashed writer left, refresh the
        catalog, and yield a :class:`UnitOfWork` whose staged changes are committed together when
        the block ends. ``refresh=False`` skips the catalog refresh for writers that check nothing
        against other notes (a conversation note); ``publish=False`` leaves the index to the caller.

        Any exception inside the block leaves the vault as it was: staged changes live only in memory
        until the commit, so raising simply drops them (the journal makes the commit itself atomic
        across files and crash-safe).
        """
        with self._session(label, timeout=timeout):
            if refresh:
                self._partial = not self.refresh_catalog(self.catalog)
            try:
                tx = UnitOfWork(self, Transaction(self.vault, label))
                yield tx
                if tx.txn.paths:
                    self._commit(tx.txn, publish=publish)
            finally:
                self._partial = False

    def _result(self, res: dict) -> dict:
        """The notes are written either way; an index that failed to follow is said, not hidden."""
        if self.publish_error:
            res["indexWarning"] = f"saved, but the index did not update ({self.publish_error}); it catches up on the next read"
        return res

    def _stage_evolve(self, txn: Transaction, old: Entry, content: str, title: str | None = None, *,
                      aliases: list[str] | None = None, questions: list[str] | None = None,
                      origin: str | None = None,
                      provenance: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Stage "``old`` is no longer true, ``content`` is" in ``txn`` (lock held, permissions checked)."""
        if old.status != "active":
            head = old.next_id
            raise Refused(
                f"{old.id} is {old.status}, not the current version",
                hint=f"evolve the head of the chain{f' ({head})' if head else ''}",
            )
        note = self.load(old)
        inp = MemoryInput(
            type=str(note.meta.get("type") or "note"),
            title=title or note.title,
            content=content,
            memory_key=str(note.meta.get("memory_key") or old.memory_key) or None,
            project=note.meta.get("project"),
            tags=to_text_list(note.meta.get("tags")),
            # The new truth may be asked about in new words: given ones replace the old, else they carry over.
            aliases=to_text_list(note.meta.get("aliases")) if aliases is None else to_text_list(aliases),
            questions=question_list(note.meta.get("questions") if questions is None else questions),
            confidence=note.meta.get("confidence"),
            scope={"shared": "hive"}.get(old.layer, old.layer),
            task=old.task or None,
            # A private override stays one across versions (re-checked: the target may be user-stated now).
            overrides=note.meta.get("overrides") if old.layer != "shared" else None,
            origin=origin or note.meta.get("origin"),
            provenance=provenance,
        )
        if old.layer != "shared" and old.agent != (self.agent or ""):
            raise PermissionDenied(f"{old.id} belongs to agent {old.agent!r}", hint="evolve it as that agent")
        self._validate(inp)
        if content_hash(inp.content) == old.content_hash:
            raise DuplicateContent("the new content is the same as the current version", hint="nothing to do")
        path, meta, text = self._new_note(inp, taken_paths=set(txn.paths), supersedes=wikilink(old.path, old.id))
        # An override of a shared memory that has since changed or gone is kept as history (it matches
        # nothing any more); one of a memory that is still current is checked again, as on remember.
        target = self.catalog.by_id(str(inp.overrides)) if inp.overrides else None
        current = target is not None and target.layer == "shared" and target.status == "active"
        self._check_unique(meta, ignore_ids={old.id}, pending=[], check_overrides=current)
        old_meta = with_id(note.meta, old.id)
        old_meta.update(status="superseded", superseded_by=wikilink(path, meta["id"]), updated=now_iso())
        txn.write(path, text, expect_old="")
        txn.write(old.path, render(old_meta, note.body, like=note), expect_old=old.sha)
        return path, meta

    def _resolve_evidence(self, inp: MemoryInput) -> None:
        """The caller's evidence request, checked against its conversation, as the record the memory
        (or the proposal) keeps; resolved once, so a write kept pending replays the same record."""
        from .conversations import conversation_evidence

        ev = dict(inp.evidence or {})
        rec = conversation_evidence(self.vault, agent=self.agent, conversation=str(ev.get("conversation") or ""),
                                    excerpt=ev.get("excerpt"), turn=ev.get("turn"))
        inp.provenance = {**(inp.provenance or {}), "evidence": rec}
        inp.evidence = None

    def _propose(self, inp: MemoryInput) -> dict:
        """Queue an agent's shared write for Brain Review instead of writing shared memory."""
        if inp.overrides:
            raise UsageError("a shared memory cannot override another one",
                             hint="drop --overrides or --memory-scope hive")
        with self.transaction("propose") as tx:
            return stage_remember_proposal(self.catalog, self.vault, tx.txn, inp, agent=self.agent)

    # -- commands ----------------------------------------------------------------------------------
    def _check_type(self, inp: MemoryInput) -> None:
        """A caller's new memory must have a known type; versions and hand-written notes keep theirs."""
        inp.check()  # text first: the type must be storable before it can be named in an error
        try:
            inp.type = check_type(inp.type, self.settings.memory_types)
        except UsageError:
            from ..config import resolve

            # A server resolved its settings when it started: a type added with `config set` since counts.
            inp.type = check_type(inp.type, resolve().memory_types)

    @_deferrable("remember")
    def remember(self, inp: MemoryInput) -> dict:
        self._check_type(inp)
        self._validate(inp)
        if inp.evidence is not None:
            self._resolve_evidence(inp)
        if self._proposes(inp):
            return self._propose(inp)
        with self.transaction("remember") as tx:
            path, meta = tx.remember(inp)
        return self._result({"status": "created", "id": meta["id"], "path": path, "memoryKey": meta["memory_key"], "layer": meta["layer"]})

    @_deferrable("evolve")
    def evolve(self, memory_id: str, content: str, title: str | None = None, aliases: list[str] | None = None,
               questions: list[str] | None = None) -> dict:
        # Checked before the lock, as remember's input is: a bad list or a secret refuses without waiting.
        questions = None if questions is None else question_list(questions)
        check_secrets(aliases=aliases, questions=questions)
        with self.transaction("evolve") as tx:
            old = tx.entry(memory_id)
            self._may_change(old)
            path, meta = tx.evolve(old, content, title, aliases=aliases, questions=questions)
        return self._result({"status": "evolved", "id": meta["id"], "path": path, "supersedes": old.id, "oldPath": old.path})

    def get(self, memory_id: str, *, refresh: bool = True) -> dict:
        """One memory and its chain. ``refresh=False``: the catalog is kept current by someone else (the
        server's indexing loop, told by its watcher what changed); only a miss walks the vault."""
        if refresh:
            self.catalog.refresh()
        self._partial = not refresh
        try:
            e = self._entry(memory_id)
        finally:
            self._partial = False
        note = self.load(e, to_rewrite=False)
        chain = self._chain(e)
        # ``status`` is derived from the whole chain; ``meta`` is what the note itself says. A read:
        # secrets in a hand-edited note never leave (the catalog's meta is scrubbed already).
        return {"id": e.id, "path": e.path, "status": e.status, "meta": {k: v for k, v in e.meta.items()},
                "content": scrub(note.body.strip("\n"), path=e.path), "chain": chain,
                "syncConflicts": for_entry(self.catalog, e, self.agent)}

    def _chain(self, e: Entry) -> list[dict]:
        """The whole evolution chain, oldest first."""
        return [{"id": v.id, "status": v.status, "path": v.path, "updated": v.meta.get("updated")}
                for v in versions(self.catalog, e)]

    @_deferrable("update")
    def update(self, memory_id: str, *, title: str | None = None, content: str | None = None, tags: list[str] | None = None,
               project: str | None = None, confidence: float | None = None, status: str | None = None) -> dict:
        if all(v is None for v in (title, content, tags, project, confidence, status)):
            raise UsageError("nothing to update", hint="pass --title, --content, --tags, --project, --confidence or --status")
        if status is not None and status not in ("active", "archived"):
            raise UsageError("update can set status to 'archived' (or back to 'active'); truth changes go through evolve")
        check_secrets(title=title, content=content, tags=tags, project=project)
        for what, value in (("the title", title), ("the content", content), ("the project", project)):
            if value is not None:
                check_text(value, what)
        for t in tags or ():
            check_text(t, "a tag")
        check_sizes(" ".join(title.split()) if title is not None else None, content)
        with self.transaction("update") as tx:
            e = tx.entry(memory_id)
            self._may_change(e)
            note = self.load(e)
            meta = with_id(note.meta, e.id)
            body = note.body
            if title is not None:
                title = " ".join(title.split())
                if not title:
                    raise UsageError("title is empty")
                meta["title"] = title
            if content is not None:
                if not content.strip():
                    raise UsageError("content is empty")
                meta["content_hash"] = content_hash(content)
                for d in self.catalog.by_content_hash(meta["content_hash"]):
                    if d.id != e.id and d.status == "active" and visible_from(d, e.layer, e.agent):
                        raise DuplicateContent(f"the same content is already stored as {d.id} ({d.path})")
                body = content
            if tags is not None:
                meta["tags"] = tags or None
            if project is not None:
                meta["project"] = project or None
            if confidence is not None:
                meta["confidence"] = clean_confidence(confidence)
            if status is not None:
                if e.status == "superseded":
                    raise Refused(f"{e.id} is superseded; its status follows the chain")
                meta["status"] = status
            meta["updated"] = now_iso()
            tx.write(e.path, render(meta, body, like=note), expect_old=e.sha)
        return self._result({"status": "updated", "id": e.id, "path": e.path})

    @_deferrable("delete")
    def delete(self, memory_id: str, *, confirm: bool, force: bool = False) -> dict:
        if not confirm:
            raise NotConfirmed("delete is permanent", hint="add --confirm to delete")
        with self.transaction("delete") as tx:
            e = tx.entry(memory_id)
            if e.layer == "shared":
                require_owner(self.settings, "deleting shared memory")
            self._may_change(e)
            prev_id, next_id = e.meta.get("supersedes"), e.next_id or None
            if (prev_id or next_id) and not force:
                raise ChainProtected(
                    f"{e.id} is part of an evolution chain ({len(self._chain(e))} versions); deleting it breaks the history",
                    hint="archive it with `update --status archived`, or pass --force to delete and relink the chain",
                )
            tx.delete(e.path, expect_old=e.sha)
            # Relink neighbours so the chain stays walkable without the deleted version.
            for nid, key, value in ((prev_id, "superseded_by", next_id), (next_id, "supersedes", prev_id)):
                if not nid:
                    continue
                n = self.catalog.by_id(str(nid))
                if n is None or n.problem:
                    continue
                nn = self.load(n)
                meta = with_id(nn.meta, n.id)
                linked = self.catalog.by_id(str(value)) if value else None
                meta[key] = wikilink(linked.path, linked.id) if linked is not None else value
                if key == "superseded_by" and not value and meta.get("status") == "superseded":
                    meta["status"] = "active"
                meta["updated"] = now_iso()
                tx.write(n.path, render(meta, nn.body, like=nn), expect_old=n.sha)
        # Committed: recorded on this device, so that a sync bringing it back is named (.deletions).
        from .deletions import record_deletion

        record_deletion(self.vault.state, e, self.agent)
        return self._result({"status": "deleted", "id": e.id, "path": e.path})

    @_deferrable("batch")
    def batch(self, records: list[Any]) -> dict:
        if not isinstance(records, list):
            raise UsageError("the batch file must hold a JSON list of records (or {\"records\": [...]})")
        if not records:
            raise UsageError("the batch is empty")
        if len(records) > MAX_BATCH:
            raise UsageError(f"a batch holds at most {MAX_BATCH} records, this one has {len(records)}", hint="split the file")
        report: list[dict] = []
        with self.transaction("batch") as tx:
            for i, raw in enumerate(records):
                try:
                    inp = MemoryInput.from_dict(raw)
                    self._check_type(inp)
                    self._validate(inp)
                    if self._proposes(inp):
                        if inp.overrides:
                            raise UsageError("a shared memory cannot override another one")
                        res = stage_remember_proposal(self.catalog, self.vault, tx.txn, inp, agent=self.agent)
                        report.append({"index": i, "status": "proposed", "proposal": res["proposal"],
                                       "path": res["path"]})
                        continue
                    path, meta = tx.remember(inp)
                except (Refused, UsageError, NotFound) as err:
                    report.append({"index": i, "status": "refused", "error": type(err).__name__, "message": err.message})
                    continue
                report.append({"index": i, "status": "ok", "id": meta["id"], "path": path})
            if any(r["status"] not in ("ok", "proposed") for r in report):
                bad = sum(r["status"] not in ("ok", "proposed") for r in report)
                # Inside the unit of work: nothing staged is written. The report travels with the error
                # (its ``records``), so every surface names which record was refused and why.
                raise Refused(f"{bad} of {len(records)} records refused; nothing was written",
                              hint="fix them and run again", records=report)
        proposed = sum(r["status"] == "proposed" for r in report)
        return self._result({"status": "created", "count": len(report) - proposed, "proposed": proposed, "records": report})


class UnitOfWork:
    """Changes staged inside :meth:`MemoryStore.transaction`: the public write API for everything that
    writes notes besides the memory commands themselves (Brain Review, promotion, conversations,
    pruning, and what comes: consolidation, repair, capsule import).

    Checks that depend on other notes (key taken, identical content, overrides) run here, under the
    lock, against the catalog the transaction refreshed, and also see what this unit already staged.
    """

    def __init__(self, store: MemoryStore, txn: Transaction) -> None:
        self.store = store
        self.txn = txn
        self._staged: list[dict] = []  # frontmatter of memories staged so far (duplicate checks)

    @property
    def catalog(self) -> Catalog:
        return self.store.catalog

    @property
    def paths(self) -> list[str]:
        return self.txn.paths

    def entry(self, memory_id: str) -> Entry:
        """A memory the caller may read (NotFound otherwise)."""
        return self.store._entry(memory_id)

    def load(self, e: Entry) -> Any:
        """The parsed note behind ``e`` (NoteError when it cannot be read)."""
        return self.store.load(e)

    def remember(self, inp: MemoryInput) -> tuple[str, dict]:
        """Stage a new memory; returns (path, frontmatter)."""
        st = self.store
        st._validate(inp)
        path, meta, text = st._new_note(inp, taken_paths=set(self.txn.paths))
        st._check_unique(meta, ignore_ids=set(), pending=self._staged)
        self.txn.write(path, text, expect_old="")
        self._staged.append(meta)
        return path, meta

    def evolve(self, old: Entry, content: str, title: str | None = None, *, aliases: list[str] | None = None,
               questions: list[str] | None = None, origin: str | None = None,
               provenance: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Stage "``old`` is no longer true, ``content`` is"; returns the new note's (path, frontmatter)."""
        return self.store._stage_evolve(self.txn, old, content, title, aliases=aliases, questions=questions,
                                        origin=origin, provenance=provenance)

    def write(self, path: str, text: str, *, expect_old: str | None = None) -> None:
        """Stage a whole note; ``expect_old`` is the sha the note must still have ("" = must not exist)."""
        self.txn.write(path, text, expect_old=expect_old)

    def delete(self, path: str, *, expect_old: str | None = None) -> None:
        self.txn.delete(path, expect_old=expect_old)
