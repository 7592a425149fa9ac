"""What the memory and search modules need from the engine that drives them, as a protocol.

``hive_brain.engine.Engine`` satisfies it. Lower wings may not import the engine (it sits above
them), so modules that are handed one (core memory, conversations, health, browse, replay) type it
with :class:`EngineLike` instead of ``Any``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..config import Settings
    from ..index.indexer import Indexer
    from ..store.catalog import Catalog
    from ..store.vault import Vault


class MemoryLike(Protocol):
    """What engine-driven modules use of the memory store (:class:`~hive_brain.memory.store.MemoryStore`):
    its unit of work. A protocol rather than the store's import: the store imports modules typed by
    this one (conversations, for a proposal's evidence), and that import made a circle."""

    publish_error: str | None

    def transaction(self, label: str, *, timeout: float | None = None, publish: bool = True,
                    refresh: bool = True) -> AbstractContextManager[Any]: ...


class EngineLike(Protocol):
    vault: Vault
    settings: Settings

    @property
    def catalog(self) -> Catalog: ...

    @property
    def memory(self) -> MemoryLike: ...

    @property
    def indexer(self) -> Indexer: ...

    def status(self) -> dict[str, Any]: ...

    def recall(self, query: str, **opts: Any) -> dict[str, Any]: ...
