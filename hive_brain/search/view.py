"""The one factory for read views: what a recall reads, however it is opened.

Four callers used to assemble a :class:`~hive_brain.search.recall.View` by hand (the engine, the
server, the prompt hook, replay); they now all come through here:

* :func:`open_view` — ``catch_up=False``: read-only, the current generation as it is indexed (no
  lock, no writer, no embedding; what the prompt hook reads without a server);
  ``catch_up=True``: first brings the index up to date with the vault when nobody else is writing,
  and embeds a little of the queue when it can (never waiting on a writer);
  ``generation=G``: a replay of generation G from its scratch index (:mod:`.replay`).
* :func:`scan_view` — no index at all can be read (missing and being built by another process,
  damaged, the state dir unusable): a plain scan of the notes answers instead (:mod:`.scan`).
* :func:`assemble` — the last step of all of them, and all the server needs (it holds the pieces
  warm): whether semantic search is on, and the warnings a reader should see.

Import-light: the prompt hook imports this module, so only the standard library is imported at
module level; the read-only path imports no writer (indexer, lock), numpy or LanceDB.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import Settings
    from ..index.generations import GenerationStore
    from ..index.indexer import Indexer
    from ..index.lexical import LexicalIndex
    from ..index.vectors import VectorIndex
    from ..store.catalog import Catalog
    from ..store.vault import Vault
    from .recall import View

NO_PACK = "no embedding pack installed (run `hive-brain model install`)"
NOT_EMBEDDED = "{n} passages are not embedded yet; semantic search covers the rest"
SERVER_STARTING = ("the server is starting (or not answering): a lexical answer for now; the next questions are "
                   "answered hybrid by the server")
WRITER_BUSY = "another process is writing; results may miss its last change"
# Why the index is unavailable, for the scan that answers instead (:mod:`.scan`).
INDEX_BUILDING = "another process is building it"
INDEX_EMPTY = "it holds none of the indexed notes (damaged, or being rebuilt)"
INDEX_NONE = "nothing is indexed yet"
INDEX_OTHER_VERSION = "it was built by another version of hive-brain"


def hook_scan_budget(settings: Settings) -> float:
    """The seconds a scan may read notes for in the prompt hook: a third of its deadline (pass 1 only;
    the best notes' parse and the pack come after it, and the hook's process start before)."""
    return float(settings.hook_deadline) / 3


def assemble(*, lexical: LexicalIndex, catalog: Catalog, generation: int | None, semantic: bool = True,
             vectors: VectorIndex | None = None, embedder: Any = None, off_reason: str | None = None, pending: int = 0,
             warnings: list[str] | tuple[str, ...] = (), state: Path | None = None) -> View:
    """A View from its parts. Vectors count only when semantic search is asked for and both the
    table and the model are there; otherwise ``off_reason`` says why (when it was asked for).
    ``state``: the vault's state dir, whose usage log ranks (memory.usage); None (replay): it does not."""
    from .recall import View

    usage = None
    if state is not None:
        from ..memory.usage import table

        usage = table(state)

    out = list(warnings)
    on = semantic and vectors is not None and embedder is not None
    if on and pending:
        out.append(NOT_EMBEDDED.format(n=pending))
    return View(lexical=lexical, catalog=catalog, vectors=vectors if on else None, embedder=embedder if on else None,
                generation=generation, warnings=out, semantic_off_reason=None if on or not semantic else off_reason,
                usage=usage)


def scan_view(vault: Vault, settings: Settings, why: str, warnings: list[str] | tuple[str, ...] = (), *,
              budget_s: float | None = None) -> View:
    """A view that answers by scanning the notes (:mod:`.scan`): ``why`` the index cannot be read;
    ``budget_s``: the most seconds one search may read notes for (default :data:`.scan.BUDGET_S`)."""
    from .recall import View
    from .scan import BUDGET_S, SEMANTIC_OFF, NoteScan

    # No index, no catalog: search() hands a scan view to its NoteScan before either is touched.
    return View(lexical=None, catalog=None, generation=None, warnings=list(warnings),  # type: ignore[arg-type]
                semantic_off_reason=SEMANTIC_OFF, scan=NoteScan(vault, settings, why, BUDGET_S if budget_s is None else budget_s))


def state_problem(e: BaseException) -> str:
    """One line on why the state dir (index, catalog, generations) could not be used."""
    msg = " ".join(str(e).split()) or type(e).__name__
    return f"its state dir cannot be used: {msg[:200]}"


def open_view(vault: Vault, settings: Settings, *, catch_up: bool = False, generation: int | None = None,
              semantic: bool = True, indexer: Indexer | None = None, catalog: Catalog | None = None,
              embed: bool | Callable[[], bool] = True, embed_budget_s: float = 20.0) -> View | None:
    """A read view of `vault` (see the module docstring for the three kinds).

    ``indexer``/``catalog``: the caller's own (an Engine's), reused instead of opened again; the
    read-only kind needs neither. ``embed``: whether a catch-up view may embed queued passages
    (False while a server is up: it alone writes vectors, in large batches); a callable is asked
    only when passages are waiting. The read-only kind returns None when nothing is indexed yet
    (it never indexes)."""
    if generation is not None:
        from .replay import replay_parts

        parts = replay_parts(vault, _indexer(vault, settings, indexer, catalog), generation, semantic=semantic)
        return assemble(generation=generation, semantic=semantic, **parts)
    if catch_up:
        return _catch_up_view(vault, settings, _indexer(vault, settings, indexer, catalog), semantic=semantic,
                              embed=embed, embed_budget_s=embed_budget_s)
    return _read_only_view(vault, settings, semantic=semantic, catalog=catalog)


def _indexer(vault: Vault, settings: Settings, indexer: Indexer | None, catalog: Catalog | None) -> Indexer:
    if indexer is not None:
        return indexer
    from ..index.indexer import Indexer

    return Indexer(vault, settings, catalog=catalog)


def _read_only_view(vault: Vault, settings: Settings, *, semantic: bool, catalog: Catalog | None) -> View | None:
    """The current generation through a read-only index handle, trusting the ``current`` pointer
    (no manifest re-hash): lexical only, since loading the model is a second or more."""
    from ..index.generations import GenerationStore
    from ..index.lexical import LexicalIndex

    gens = GenerationStore(vault.state)
    gid = gens.pointer()
    if gid is None:
        return None
    lex = LexicalIndex(vault.state / "index" / "lexical", read_only=True)  # = Indexer.reader()
    lex.reload()
    if lex.doc_count() == 0 and _indexed_notes(gens, gid):
        # The prompt hook reads this view: its scan gets a share of the hook's deadline, not seconds.
        return scan_view(vault, settings, INDEX_EMPTY, gens.warnings, budget_s=hook_scan_budget(settings))
    if catalog is None:
        from ..store.catalog import Catalog

        catalog = Catalog(vault, max_note_bytes=settings.max_note_bytes)
    return assemble(lexical=lex, catalog=catalog, generation=gid, semantic=semantic,
                    off_reason="the server is not running", warnings=gens.warnings, state=vault.state)


def _catch_up_view(vault: Vault, settings: Settings, idx: Indexer, *, semantic: bool,
                   embed: bool | Callable[[], bool], embed_budget_s: float) -> View:
    """The current index after a catch-up that never waits on a writer.

    Reading never fails because someone is writing: when the lock is taken the view answers with
    what is indexed and leaves catching up and embedding to the holder (a server, a rebuild)."""
    import sqlite3  # here: the prompt hook imports this module and never comes this way

    from ..errors import IndexError_, LockTimeout

    warnings: list[str] = []
    try:
        busy = idx.try_catch_up() is None
        gid = idx.gens.current_id()
    except (OSError, IndexError_, sqlite3.Error) as e:
        return scan_view(vault, settings, state_problem(e))
    if busy:
        warnings.append(WRITER_BUSY)
    warnings += idx.gens.warnings
    if gid is None:
        if busy:
            # Nothing indexed, and the lock holder (a rebuild, a server's first index) is indexing:
            # waiting for it cost a recall the whole lock timeout and then an error.
            return scan_view(vault, settings, INDEX_BUILDING, [w for w in warnings if w != WRITER_BUSY])
        from ..store.journal import write_session

        try:
            with write_session(vault, timeout=settings.lock_timeout, command="first index"):
                idx.catch_up(label="first index")
            gid = idx.gens.current_id()
        except LockTimeout:
            return scan_view(vault, settings, INDEX_BUILDING, warnings)
        except (OSError, IndexError_, sqlite3.Error) as e:
            return scan_view(vault, settings, state_problem(e), warnings)
    vectors = embedder = None
    pending = 0
    off = None
    if semantic and idx.vectors is not None:
        vectors, embedder = idx.vectors, idx.embedder
        pending = idx.pending_count()
        if pending and not busy and (embed() if callable(embed) else embed):
            try:
                # The model runs outside the lock; a writer taking it meanwhile only ends the run early.
                pending = int(idx.embed_pending(max_seconds=embed_budget_s, lock_timeout=1.0).get("pending") or 0)
            except LockTimeout:
                pending = idx.pending_count()
    elif semantic:
        off = NO_PACK if settings.semantic else "disabled"
    lex = idx.lexical
    lex.reload()
    if busy and lex.doc_count() == 0 and _indexed_notes(idx.gens, gid):
        # Found damaged (moved aside) while another process holds the lock: the notes answer until
        # the next catch-up indexes them again.
        return scan_view(vault, settings, INDEX_EMPTY, warnings)
    return assemble(lexical=lex, catalog=idx.catalog, generation=gid, semantic=semantic, vectors=vectors,
                    embedder=embedder, off_reason=off, pending=pending, warnings=warnings, state=vault.state)


def _indexed_notes(gens: GenerationStore, gid: int | None) -> int:
    """How many notes generation ``gid`` says are indexed (0 when it cannot be read)."""
    if gid is None:
        return 0
    try:
        return int(gens.load(gid).note_count)
    except Exception:  # noqa: BLE001 - an unreadable generation is reported by whoever reads it next
        return 0
