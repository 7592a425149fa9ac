"""The core facade: one object per (vault, settings) that every front end (CLI, server, MCP, hooks,
benchmarks) calls. It owns no logic of its own; it wires the modules together.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from .config import Settings, resolve
from .store.vault import Vault, open_vault


class Engine:
    def __init__(self, vault: Vault, settings: Settings) -> None:
        self.vault = vault
        self.settings = settings

    @classmethod
    def open(cls, vault_path: str | Path | None = None, **flags: Any) -> Engine:
        settings = resolve(vault=str(vault_path) if vault_path else None, **flags)
        return cls(open_vault(settings), settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> Engine:
        return cls(open_vault(settings), settings)

    @cached_property
    def memory(self):
        from .memory.store import MemoryStore

        return MemoryStore(self.vault, self.settings, publish=self.publish)

    @cached_property
    def catalog(self):
        return self.memory.catalog

    def publish(self, paths: list[str]) -> None:
        """Bring the index and generations up to date after a write (called under the lock)."""
        self.indexer.catch_up(changed=paths, label="write: " + ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else ""))

    @cached_property
    def indexer(self):
        from .index.indexer import Indexer

        return Indexer(self.vault, self.settings, catalog=self.catalog)

    # -- read side ------------------------------------------------------------------------------
    def rebuild(self, *, progress: bool = False, embed: bool = True) -> dict:
        return self.indexer.rebuild(progress=progress, embed=embed)

    def view(self, *, catch_up: bool = True, semantic: bool = True, embed_budget_s: float = 20.0):
        """The current index as a recall view; first catches up with the vault (never waiting on a writer)."""
        from .search.recall import View

        idx = self.indexer
        warnings: list[str] = []
        if catch_up:
            res = idx.try_catch_up()
            if res is None:
                warnings.append("another process is writing; results may miss its last change")
        gid = idx.gens.current_id()
        warnings += idx.gens.warnings
        if gid is None:
            with self._lock("index"):
                idx.catch_up(label="first index")
            gid = idx.gens.current_id()
        off = None
        vectors = embedder = None
        if semantic and idx.vectors is not None:
            # With a server up, it alone writes vectors (in large batches); small writes from here
            # would fragment the table. Without one, embed what is queued, within a budget.
            if idx.pending_count() and not self._server_up():
                idx.embed_pending(max_seconds=embed_budget_s, lock_timeout=1.0)
                left = idx.pending_count()
                if left:
                    warnings.append(f"{left} passages are not embedded yet; semantic search covers the rest")
            vectors, embedder = idx.vectors, idx.embedder
        elif semantic:
            off = "no embedding pack installed (run `hive-brain model install`)" if self.settings.semantic else "disabled"
        lex = idx.lexical if catch_up else idx.reader()
        lex.reload()
        return View(lexical=lex, catalog=self.catalog, vectors=vectors, embedder=embedder, generation=gid,
                    warnings=warnings, semantic_off_reason=off)

    def _server_up(self) -> bool:
        from .rpc.client import server_info

        try:
            return bool(server_info(self.vault.state, ping_timeout=0.2).get("running"))
        except Exception:  # noqa: BLE001 - no server is the safe answer
            return False

    def _lock(self, command: str):
        from .store.journal import write_session

        return write_session(self.vault, timeout=self.settings.lock_timeout, command=command)

    def _via_server(self, op: str, args: dict[str, Any]) -> dict | None:
        """Ask the running server (warm model and searchers); None when there is none."""
        if not self.settings.use_server:
            return None
        from .rpc import client

        try:
            return client.call(self.vault.state, op, {**args, "agent": self.settings.agent_id}, timeout=60.0)
        except client.ServerUnavailable:
            return None

    def recall(self, query: str, *, semantic: bool = True, view=None, **opts: Any) -> dict:
        from .search.recall import search

        if view is None and "now" not in opts:
            res = self._via_server("recall", {"query": query, "semantic": semantic, **opts})
            if res is not None:
                return res
        v = view or self.view(semantic=semantic)
        return search(v, query, agent=self.settings.agent_id, semantic=semantic, **opts)

    # -- maintenance ----------------------------------------------------------------------------
    def doctor(self) -> dict:
        with self._lock("doctor") as recovered:
            self.catalog.refresh()
        problems = [{"path": e.path, "problem": e.problem} for e in self.catalog.problems()]
        return {"notes": len(self.catalog.all()), "problems": problems, "recovered": recovered}

    def answer(self, query: str, *, budget: int | None = None, semantic: bool = True, view=None, **opts: Any) -> dict:
        from .search.answer import answer_view

        if view is None and "now" not in opts:
            res = self._via_server("answer", {"query": query, "semantic": semantic, "budget": budget, **opts})
            if res is not None:
                return res
        v = view or self.view(semantic=semantic)
        return answer_view(v, query, agent=self.settings.agent_id, semantic=semantic, budget=budget, **opts)

    def replay(self, query: str, generation: int, **opts: Any) -> dict:
        from .search.replay import replay_view

        return self.recall(query, view=replay_view(self, generation), **opts)

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
        return {"current": cur, "generations": gens.list(), "earliest_replayable": gens.earliest_replayable(),
                "policy": {"checkpoint_every": CHECKPOINT_EVERY, "prune_keeps": 20}, "coverage": cov,
                "warnings": gens.warnings}

    def status(self) -> dict:
        from .rpc.client import server_info

        idx = self.indexer
        gid = idx.gens.current_id()
        pack = idx.pack_dir
        _, _, todo, gone = idx.diff()
        return {
            "vault": str(self.vault.root), "vault_id": self.vault.vault_id, "state_dir": str(self.vault.state),
            "agent": self.settings.agent_id, "generation": gid, "notes": len(self.catalog.all()),
            "memories": len(self.catalog.memories()), "stale_notes": len(todo) + len(gone),
            "semantic": {"on": pack is not None, "pack": str(pack) if pack else None, "pack_key": idx.pack_key,
                         "pending_passages": idx.pending_count() if pack else None,
                         "how_to_enable": None if pack else "run `hive-brain model install`"},
            "server": server_info(self.vault.state),
            "warnings": idx.gens.warnings,
        }
