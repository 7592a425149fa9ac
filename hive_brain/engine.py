"""The core facade: one object per (vault, settings) that every front end (CLI, server, MCP, hooks,
benchmarks) calls. It owns no logic of its own; it wires the modules together.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from .config import Settings, resolve
from .vault import Vault, open_vault


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
        from .memory import MemoryStore

        return MemoryStore(self.vault, self.settings, publish=self.publish)

    @cached_property
    def catalog(self):
        return self.memory.catalog

    def publish(self, paths: list[str]) -> None:
        """Bring the index and generations up to date after a write (called under the lock)."""
        idx = self.indexer
        if idx is not None:
            idx.catch_up(changed=paths)

    @cached_property
    def indexer(self):
        try:
            from .indexer import Indexer
        except ImportError:  # the index layer is optional while it is being built
            return None
        return Indexer(self.vault, self.settings, catalog=self.catalog)

    # -- read side ------------------------------------------------------------------------------
    def rebuild(self, *, progress: bool = False) -> dict:
        return self.indexer.rebuild(progress=progress)

    def recall(self, query: str, **opts: Any) -> dict:
        from .recall import recall

        return recall(self, query, **opts)

    # -- maintenance ----------------------------------------------------------------------------
    def doctor(self) -> dict:
        from .journal import write_session

        with write_session(self.vault, timeout=self.settings.lock_timeout, command="doctor") as recovered:
            self.catalog.refresh()
        problems = [{"path": e.path, "problem": e.problem} for e in self.catalog.problems()]
        return {"notes": len(self.catalog.all()), "problems": problems, "recovered": recovered}
