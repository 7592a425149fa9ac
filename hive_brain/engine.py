"""The core facade: one object per (vault, settings) that every front end (CLI, server, MCP, hooks,
benchmarks) calls. It owns no logic of its own; it wires the modules together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from .config import Settings, resolve
from .store.vault import Vault, open_vault

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from .index.indexer import Indexer
    from .memory.store import MemoryStore
    from .reader import Reader
    from .search.recall import View
    from .store.catalog import Catalog

__all__ = ["Engine"]


class Engine:
    def __init__(self, vault: Vault, settings: Settings) -> None:
        self.vault = vault
        self.settings = settings
        self._started_server = False  # a read of this engine started the server (_fallback_view)

    @classmethod
    def open(cls, vault_path: str | Path | None = None, **flags: Any) -> Engine:
        settings = resolve(vault=str(vault_path) if vault_path else None, **flags)
        return cls(open_vault(settings), settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> Engine:
        return cls(open_vault(settings), settings)

    @cached_property
    def memory(self) -> MemoryStore:
        from .memory.store import MemoryStore

        with self._usable_state():
            return MemoryStore(self.vault, self.settings, publish=self.publish)

    @cached_property
    def catalog(self) -> Catalog:
        return self.memory.catalog

    def publish(self, paths: list[str]) -> None:
        """Bring the index and generations up to date after a write (called under the lock)."""
        from .index.indexer import write_label

        self.indexer.catch_up(changed=paths, label=write_label(paths))

    @cached_property
    def indexer(self) -> Indexer:
        from .index.indexer import Indexer

        catalog = self.catalog
        with self._usable_state():
            return Indexer(self.vault, self.settings, catalog=catalog)

    @contextmanager
    def _usable_state(self) -> Iterator[None]:
        """Opening what lives in the state dir: when the dir itself cannot be used (a file in its place,
        not writable), one error naming it and the fix (store.vault.unusable_state), not the OSError
        or SQLite error of whichever file came first. A damaged file inside it is left to its owner."""
        import sqlite3

        from .store.vault import state_unusable_error

        try:
            yield
        except (OSError, sqlite3.Error) as e:
            err = state_unusable_error(self.vault.state, e)
            if err is None:
                raise
            raise err from e

    # -- read side ------------------------------------------------------------------------------
    def rebuild(self, *, progress: Callable[[str, int, int], None] | None = None, embed: bool = True) -> dict:
        from .memory.layers import require_owner

        # Reads every note of every layer and rewrites all state: the owner's in enforcement mode.
        require_owner(self.settings, "rebuilding the index")
        return self.indexer.rebuild(progress=progress, embed=embed)

    @overload
    def view(self, *, catch_up: Literal[True] = True, semantic: bool = True, embed_budget_s: float = 20.0,
             generation: int | None = None) -> View: ...

    @overload
    def view(self, *, catch_up: bool, semantic: bool = True, embed_budget_s: float = 20.0,
             generation: int | None = None) -> View | None: ...

    def view(self, *, catch_up: bool = True, semantic: bool = True, embed_budget_s: float = 20.0,
             generation: int | None = None) -> View | None:
        """A recall view (:func:`~hive_brain.search.view.open_view`): by default the current index after
        a catch-up that never waits on a writer; ``generation=G`` replays generation G."""
        import sqlite3

        from .errors import IndexError_
        from .search.view import open_view, scan_view, state_problem

        try:
            indexer, catalog = self.indexer, self.catalog
        except (OSError, sqlite3.Error, IndexError_) as e:
            if generation is not None:
                raise
            # The state dir cannot hold a catalog or an index (gone read-only, a file in its place, a
            # full disk): the notes are still there, and a scan of them answers (search/scan.py).
            return scan_view(self.vault, self.settings, state_problem(e))
        # With a server up, it alone writes vectors (in large batches); small writes from here
        # would fragment the table.
        return open_view(self.vault, self.settings, catch_up=catch_up, generation=generation, semantic=semantic,
                         indexer=indexer, catalog=catalog, embed=lambda: not self._server_up(),
                         embed_budget_s=embed_budget_s)

    def _server_up(self) -> bool:
        from .rpc.client import server_info

        try:
            return bool(server_info(self.vault.state, ping_timeout=0.2).get("running"))
        except Exception:  # noqa: BLE001 - no server is the safe answer
            return False

    def _lock(self, command: str) -> AbstractContextManager[list[dict]]:
        from .store.journal import write_session

        return write_session(self.vault, timeout=self.settings.lock_timeout, command=command)

    @cached_property
    def reader(self) -> Reader:
        """This engine's reads: the warm server first, else a catch-up view in-process."""
        from .reader import Reader

        return Reader(self.vault.state, agent=self.settings.agent_id, use_server=self.settings.use_server,
                      local_view=self._fallback_view, auth=self.settings.auth)

    def _fallback_view(self, semantic: bool) -> View | None:
        """The view a read uses when the server does not answer. With a server in use and started on
        demand (the defaults), the models belong to it: loading both here cost a cold `recall` 21 s and
        950 MB (issue 30), so the read starts the server and answers lexically at once, saying so.
        ``HIVE_BRAIN_USE_SERVER=0`` or ``autostart = false`` keep the in-process hybrid read."""
        s = self.settings
        if not (semantic and s.use_server and s.autostart and self.indexer.pack_dir is not None):
            return self.view(semantic=semantic)
        from .rpc.client import autostart
        from .search.view import SERVER_STARTING

        self._started_server = autostart(s) or self._started_server
        view = self.view(semantic=False)
        if view is not None:
            view.warnings.append(SERVER_STARTING)
            view.semantic_off_reason = SERVER_STARTING
        return view

    def recall(self, query: str, *, semantic: bool = True, view: View | None = None, **opts: Any) -> dict:
        if view is None:
            res = self._mark_started(self.reader.recall(query, semantic=semantic, **opts))
        else:
            from .search.recall import search

            res = search(view, query, agent=self.settings.agent_id, semantic=semantic, **opts)
        if opts.get("include_operational") and view is None:
            # Operational events live in a per-device journal, not the index: a list of their own,
            # beside the ranked hits (docs/operations.md). A replayed generation has none.
            from .memory.operations import search_operations

            try:
                res["operational"] = search_operations(self.vault.state, query, agent=self.settings.agent_id,
                                                       limit=int(opts.get("limit") or 10))
            except OSError as e:  # a state dir that cannot be used (the hits then came from a scan)
                res["operational"] = []
                res.setdefault("warnings", []).append(f"operational events cannot be read: {e.strerror or e}")
        return res

    def _mark_started(self, res: dict) -> dict:
        if self._started_server and res.get("via") != "server":
            res["serverStarted"] = True
        return res

    # -- maintenance ----------------------------------------------------------------------------
    def doctor(self, *, keep: list[str] | None = None) -> dict:
        """``keep``: memories deleted here that a sync brought back, kept (no longer named)."""
        from .store.fsutil import damaged_files

        with self._lock("doctor") as recovered:
            # Reads every derived file: what is damaged is moved aside and rebuilt from the notes now.
            found = self.indexer.check(deep=True)
            self.catalog.refresh()
            gens = self.indexer.gens
            gens.current_id()  # verifies `current`; what it finds lands in gens.warnings
            warned = list(gens.warnings)
            if found or warned:
                self.indexer.catch_up(label="doctor: rebuild damaged state")
            gens.warnings[:] = warned
        kept = self.memory.apply_pending()
        from .memory.conflicts import find
        from .memory.core import oversized_core
        from .memory.deletions import came_back
        from .memory.deletions import keep as keep_returned
        from .memory.layers import path_readable
        from .memory.operations import log_warnings

        # An agent is told about the broken notes it may read (a private note's file name is its title);
        # the owner, whose job fixing them is, about all (in enforcement mode only a proved owner has no id).
        agent = self.settings.agent_id
        problems = [{"path": e.path, "problem": e.problem} for e in self.catalog.problems()
                    if not agent or path_readable(e.path, agent)]
        # Where a secret sits (line and kind, never the value): the index holds it redacted.
        secrets = [{"path": p, "line": n, "kind": k} for p, n, k in self.catalog.secrets()
                   if not agent or path_readable(p, agent)]
        kept_back = keep_returned(self.vault.state, self.catalog, keep, agent) if keep else []
        return {"notes": len(self.catalog.all()), "problems": problems, "recovered": recovered,
                "pendingWrites": self.own_pending(kept), "secrets": secrets,
                "conflicts": find(self.catalog, self.settings.agent_id), "damagedNow": found,
                "cameBack": came_back(self.vault.state, self.catalog, agent), "kept": kept_back,
                "damaged": damaged_files(self.vault.state), "warnings": list(dict.fromkeys([*gens.warnings, *log_warnings(self.vault.state),
                                                 *oversized_core(self, agent)]))}

    def own_pending(self, records: list[dict]) -> list[dict]:
        """The caller's own pending writes: a record holds the write's arguments (a private memory's
        content), so each caller sees those it made (the owner: those made without an agent id)."""
        me = self.settings.agent_id or None
        return [r for r in records if (r.get("agent") or None) == me]

    def answer(self, query: str, *, budget: int | None = None, semantic: bool = True, view: View | None = None, **opts: Any) -> dict:
        if view is None:
            pack = self._mark_started(self.reader.answer(query, budget=budget, semantic=semantic, **opts))
            from .memory.operations import log_retrieved

            log_retrieved(self.vault.state, pack.get("items") or [], agent=self.settings.agent_id)
            return pack
        from .search.answer import answer_view

        return answer_view(view, query, agent=self.settings.agent_id, semantic=semantic, budget=budget, **opts)

    def replay(self, query: str, generation: int, **opts: Any) -> dict:
        return self.recall(query, view=self.view(generation=generation), **opts)

    def compare(self, query: str, a: int, b: int | None = None, **opts: Any) -> dict:
        from .search.replay import compare

        return compare(self, query, a, b, **opts)

    def generations(self) -> dict:
        gens = self.indexer.gens
        cur = gens.current_id()
        from .index.generations import CHECKPOINT_EVERY

        try:
            cov = gens.read_coverage()
        except Exception as e:  # noqa: BLE001 - reported, not fatal for listing
            cov = {"error": str(e)}
        if cov:  # coverage.json keeps its on-disk names; the listing speaks camelCase (docs/json.md)
            cov = {k.split("_")[0] + "".join(w.title() for w in k.split("_")[1:]): v for k, v in cov.items()}
        from .memory.layers import redact_paths

        listed = [{**g, "label": redact_paths(g["label"], self.settings.agent_id)} if isinstance(g.get("label"), str)
                  else g for g in gens.list()]
        return {"current": cur, "generations": listed, "earliestReplayable": gens.earliest_replayable(),
                "policy": {"checkpointEvery": CHECKPOINT_EVERY, "pruneKeeps": 20}, "coverage": cov,
                "warnings": gens.warnings}

    def prune_generations(self, keep: int) -> dict:
        """Remove old generated history (the owner's call), keeping the newest ``keep`` and a checkpoint."""
        from .memory.layers import require_owner

        require_owner(self.settings, "pruning generations")
        with self._lock("prune"):
            return self.indexer.gens.prune(keep_last=keep)

    def status(self, *, refresh: bool = True, stale: Callable[[int | None], int | None] | None = None) -> dict:
        """The vault, its index and its server. ``refresh=False``: the catalog is kept current by the
        server's indexing loop, so no stat walk of the vault (staleNotes compares it with the index).
        ``stale(generation)``: the server's count of notes not yet indexed, None when it cannot say."""
        from .rpc.client import server_info
        from .store.fsutil import damaged_files
        from .store.pending import list_pending

        idx = self.indexer
        gid = idx.gens.current_id()
        pack = idx.pack_dir
        n_stale = stale(gid) if stale is not None else None
        if n_stale is None:
            _, _, todo, gone = idx.diff(only=None if refresh else [])
            n_stale = len(todo) + len(gone)
        return {
            "vault": str(self.vault.root), "vaultId": self.vault.vault_id, "stateDir": str(self.vault.state),
            "agent": self.settings.agent_id, "generation": gid, "notes": self.catalog.count(),
            "memories": self.catalog.memory_count(), "staleNotes": n_stale,
            # Notes hive-brain cannot read (broken YAML, binary, too large): `doctor` names them.
            "unreadableNotes": self.catalog.count("problem IS NOT NULL"),
            "semantic": {"on": pack is not None, "pack": str(pack) if pack else None, "packKey": idx.pack_key,
                         "pendingPassages": idx.pending_count() if pack else None,
                         "howToEnable": None if pack else "run `hive-brain model install`"},
            "server": server_info(self.vault.state),
            "pendingWrites": self.own_pending(list_pending(self.vault.state)),
            "damaged": damaged_files(self.vault.state),
            "warnings": list(dict.fromkeys(idx.gens.warnings)),
        }
