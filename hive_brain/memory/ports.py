"""What the memory and search modules need from the engine that drives them, as a protocol.

``hive_brain.engine.Engine`` satisfies it. Lower wings may not import the engine (it sits above
them), so modules that are handed one (core memory, conversations, health, browse, replay) type it
with :class:`EngineLike` instead of ``Any``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import Settings
    from ..index.indexer import Indexer
    from ..store.catalog import Catalog
    from ..store.vault import Vault
    from .store import MemoryStore


class EngineLike(Protocol):
    vault: Vault
    settings: Settings

    @property
    def catalog(self) -> Catalog: ...

    @property
    def memory(self) -> MemoryStore: ...

    @property
    def indexer(self) -> Indexer: ...

    def status(self) -> dict[str, Any]: ...

    def recall(self, query: str, **opts: Any) -> dict[str, Any]: ...
