"""Passage vectors in LanceDB, searched with the boundary predicate as a *prefilter*.

One table per pack key (``passages_<hash of the key>``), so vectors from another model or other
settings are never compared with the query.  Rows carry every keyword field of the passage
document (docs/architecture.md) so that ``predicates.to_sql`` can express any boundary; the filter
runs before the top-k cut (DESIGN principle 5): a small agent's passages are found even when
thousands of other passages are closer to the query.

Search is exact (flat) until a table grows past ``INDEX_THRESHOLD`` rows and :meth:`optimize` builds
an IVF_PQ index; even then narrow filters keep probing partitions until the limit is filled.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import HiveBrainError, StateDamaged
from ..store.fsutil import one_line, quarantine
from .predicates import In, Pred, to_sql

KEYWORD_FIELDS = (
    "passage_id",
    "note_path",
    "note_id",
    "kind",
    "type",
    "layer",
    "agent",
    "task",
    "project",
    "status",
    "memory_key",
    "text_hash",
)
INT_FIELDS = ("date",)
FIELDS = KEYWORD_FIELDS + INT_FIELDS
INDEX_THRESHOLD = 50_000

# Large IN (...) lists are split so one statement stays small for the SQL parser.
_DELETE_CHUNK = 500


@dataclass(frozen=True)
class VecHit:
    passage_id: str
    note_path: str
    similarity: float  # cosine, in [-1, 1]; compressed for e5, so rank by it rather than threshold it


def table_name(pack_key: str) -> str:
    """The LanceDB table holding vectors of one pack key."""
    return "passages_" + hashlib.sha256(pack_key.encode("utf-8")).hexdigest()[:16]


AUTO_WARM_AFTER = 3  # searches through one object before it keeps a warm in-memory copy
AUTO_WARM_ROWS = 60_000  # ~90 MB at 384 dimensions; larger tables keep searching in LanceDB


class VectorIndex:
    """Vectors of one pack key under ``directory`` (a LanceDB database shared by all pack keys)."""

    def __init__(
        self, directory: Path, pack_key: str, dim: int, *, consistency: timedelta | None = timedelta(0)
    ) -> None:
        """``consistency`` is how stale a read may be with respect to writes by *other* processes;
        zero (the default) checks for a newer table version on every read, which costs well under a
        millisecond locally and keeps a long-running server in step with the indexer."""
        self.directory = Path(directory)
        self.pack_key = pack_key
        self.dim = int(dim)
        self.name = table_name(pack_key)
        self._consistency = consistency
        self._db: Any = None
        self._tbl: Any = None
        self._mem_max: int | None = None  # set by enable_memory_cache()
        self._mem: tuple[Any, ...] | None = None
        self._mem_checked = 0.0
        self._mem_recheck_s = 1.0
        self._searches = 0
        self._lock = threading.Lock()
        # Called (with what LanceDB said) when the table turns out damaged, before StateDamaged is
        # raised: the indexer moves it aside there and queues a full pass (Indexer._vectors_damaged).
        self.on_damage: Callable[[str], None] | None = None

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """LanceDB's errors about its own files become one StateDamaged (after ``on_damage``)."""
        try:
            yield
        except HiveBrainError:
            raise
        except Exception as e:  # noqa: BLE001 - LanceDB/Arrow raise RuntimeError, OSError, ValueError...
            problem = one_line(str(e) or type(e).__name__)
            if self.on_damage is not None:
                self.on_damage(problem)
            raise StateDamaged(f"the vector index is damaged ({problem})",
                               hint="run `hive-brain rebuild-index`; recall answers lexically meanwhile") from e

    def quarantine(self, problem: str) -> None:
        """Move the whole vector database aside (see ``store.fsutil.quarantine``); the next write
        starts a new one."""
        with self._lock:
            self._db = self._tbl = self._mem = None
            if self.directory.exists():
                quarantine(self.directory, problem)

    def damage(self) -> str | None:
        """What LanceDB cannot read in this pack's table (None: every row reads back). Reads it all:
        for ``doctor`` and ``rebuild-index``."""
        try:
            tbl = self._table(create=False)
            if tbl is not None:
                n = tbl.count_rows()
                got = tbl.search().select(["passage_id", "vector"]).limit(None).to_arrow()
                if got.num_rows != n:
                    return f"{n} rows listed, {got.num_rows} readable"
        except Exception as e:  # noqa: BLE001 - whatever LanceDB raises about its files is damage
            return one_line(str(e) or type(e).__name__)
        return None

    # ------------------------------------------------------------------ connection and schema

    def _connect(self) -> Any:
        if self._db is None:
            lancedb = import_lancedb()
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.directory), read_consistency_interval=self._consistency)
        return self._db

    def _table(self, *, create: bool) -> Any:
        """The table, or None when it does not exist and ``create`` is false."""
        if self._tbl is not None:
            return self._tbl
        with self._lock:
            if self._tbl is None:
                db = self._connect()
                try:
                    self._tbl = db.open_table(self.name)
                except (ValueError, FileNotFoundError):
                    if not create:
                        return None
                    # exist_ok: another process may create the same table at the same moment.
                    self._tbl = db.create_table(self.name, schema=self.schema(), exist_ok=True)
                self._check_dim(self._tbl)
        return self._tbl

    def schema(self) -> Any:
        import pyarrow as pa

        fields = [pa.field(name, pa.string(), nullable=False) for name in KEYWORD_FIELDS]
        fields += [pa.field(name, pa.int64(), nullable=False) for name in INT_FIELDS]
        fields.append(pa.field("vector", pa.list_(pa.float32(), self.dim), nullable=False))
        return pa.schema(fields, metadata={"pack_key": self.pack_key, "dim": str(self.dim)})

    def _check_dim(self, tbl: Any) -> None:
        vector_type = tbl.schema.field("vector").type
        if vector_type.list_size != self.dim:
            raise ValueError(
                f"table {self.name} holds {vector_type.list_size}-d vectors, expected {self.dim}"
            )

    def _to_arrow(self, rows: Sequence[dict[str, Any]]) -> Any:
        import pyarrow as pa

        # Last write wins inside one batch: merge_insert rejects duplicate keys in its source.
        unique = list({str(row["passage_id"]): row for row in rows}.values())
        columns: dict[str, Any] = {}
        for name in KEYWORD_FIELDS:
            columns[name] = pa.array([_keyword(row.get(name)) for row in unique], pa.string())
        for name in INT_FIELDS:
            columns[name] = pa.array([int(row.get(name) or 0) for row in unique], pa.int64())
        matrix = np.asarray([row["vector"] for row in unique], dtype=np.float32).reshape(len(unique), -1)
        if matrix.shape[1] != self.dim:
            raise ValueError(f"vectors have {matrix.shape[1]} dimensions, index expects {self.dim}")
        if not np.isfinite(matrix).all():
            raise ValueError("vectors contain NaN or infinity")
        columns["vector"] = pa.FixedSizeListArray.from_arrays(
            pa.array(matrix.reshape(-1), pa.float32()), self.dim
        )
        return pa.Table.from_pydict(columns, schema=self.schema())

    # ------------------------------------------------------------------ writes

    def upsert(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert rows, replacing any existing row with the same ``passage_id``.

        A row needs ``passage_id`` and ``vector``; other passage fields default to "" (and date 0).
        """
        self._mem_checked = 0.0  # our own write: look at the table version on the next search
        if not rows:
            return
        data = self._to_arrow(rows)
        with self._guard():
            tbl = self._table(create=True)
            # Always a merge (even into an empty table, where it costs about what an append does): two
            # writers that both saw an empty table must not leave duplicate passage ids behind.
            tbl.merge_insert("passage_id").when_matched_update_all().when_not_matched_insert_all().execute(data)

    def delete_notes(self, note_paths: Iterable[str]) -> None:
        """Delete every passage of these notes."""
        self._mem_checked = 0.0  # our own write: look at the table version on the next search
        self._delete_in("note_path", note_paths)

    def delete_passages(self, passage_ids: Iterable[str]) -> None:
        self._mem_checked = 0.0  # our own write: look at the table version on the next search
        self._delete_in("passage_id", passage_ids)

    def _delete_in(self, field: str, values: Iterable[str]) -> None:
        with self._guard():
            unique = sorted(set(values))
            tbl = self._table(create=False)
            if tbl is None or not unique:
                return
            for start in range(0, len(unique), _DELETE_CHUNK):
                tbl.delete(to_sql(In(field, tuple(unique[start : start + _DELETE_CHUNK]))))

    def delete_all(self) -> None:
        """Remove every row (the table itself stays, so other handles on it remain valid)."""
        with self._guard():
            self._mem_checked = 0.0  # our own write: look at the table version on the next search
            tbl = self._table(create=False)
            if tbl is not None:
                tbl.delete("true")

    # ------------------------------------------------------------------ reads

    def count(self, where: Pred | None = None) -> int:
        with self._guard():
            tbl = self._table(create=False)
            if tbl is None:
                return 0
            sql = to_sql(where)
            return int(tbl.count_rows(sql) if sql else tbl.count_rows())

    # -- warm in-memory copy (the server) ---------------------------------------------------------
    def enable_memory_cache(self, max_rows: int = 150_000, recheck_s: float = 1.0) -> None:
        """Keep an exact in-memory copy of the table for searching (a long-running server).

        A prefiltered LanceDB search costs 10-40 ms at 10k rows; a masked matrix product over the
        same rows costs well under 1 ms. The copy is reloaded when this object writes, or when the
        table version moved (checked at most every ``recheck_s``: another process may have rebuilt it).
        """
        self._mem_max = max_rows
        self._mem = None
        self._mem_checked = 0.0
        self._mem_recheck_s = recheck_s

    def warm(self) -> None:
        """Load the in-memory copy now, or reload it if the table moved since (a no-op without
        :meth:`enable_memory_cache`). The server calls this on its indexing thread before it is ready
        and after every vector write, so no request pays for the load: the copy is read lazily
        otherwise, and the first search after a server became ready took 5 s (10k rows, loaded machine)."""
        if self._mem_max is None:
            return
        with self._guard():
            self._mem_checked = 0.0  # check the table's version now, whenever it was checked last
            self._memory()

    def _memory(self) -> tuple[Any, ...] | None:
        import time as _time

        if self._mem_max is None:
            return None
        tbl = self._table(create=False)
        if tbl is None:
            return None
        now = _time.monotonic()
        if self._mem is not None and now - self._mem_checked < self._mem_recheck_s:
            return self._mem
        self._mem_checked = now
        version = tbl.version
        if self._mem is not None and self._mem[0] == version:
            return self._mem
        if tbl.count_rows() > self._mem_max:
            self._mem = None
            return None
        arrow = tbl.to_arrow()
        matrix = np.asarray(arrow.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False),
                            dtype=np.float32).reshape(-1, self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)  # cosine, like LanceDB's distance
        cols = {name: np.asarray(arrow.column(name).to_numpy(zero_copy_only=False))
                for name in FIELDS if name in arrow.column_names}
        self._mem = (version, matrix, cols, {})
        return self._mem

    def _search_memory(self, mem: tuple[Any, ...], q: Any, where: Pred | None, limit: int) -> list[VecHit]:
        _version, matrix, cols, rows_by_where = mem
        if not len(matrix):
            return []
        idx = _rows(where, cols, len(matrix), rows_by_where)
        if not len(idx):
            return []
        qn = float(np.linalg.norm(q)) or 1.0
        # Rows were normalised at load: this is the cosine. One product over every row, then the
        # boundary's rows: gathering the rows first copied the matrix (20 MB at 13k passages) per search.
        sims = (matrix @ (q / qn))[idx]
        k = min(limit, len(idx))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [VecHit(str(cols["passage_id"][idx[i]]), str(cols["note_path"][idx[i]]), float(np.clip(sims[i], -1.0, 1.0)))
                for i in top]

    def search(self, vector: Any, where: Pred | None = None, limit: int = 50) -> list[VecHit]:
        """The ``limit`` passages closest to ``vector`` among those matching ``where``, best first.

        ``where`` is applied as a prefilter (inside LanceDB, or as a row mask on the warm in-memory
        copy), never to the top-k afterwards.
        """
        query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query_vector.shape[0] != self.dim:
            raise ValueError(f"query vector has {query_vector.shape[0]} dimensions, index expects {self.dim}")
        with self._guard():
            tbl = self._table(create=False)
            if tbl is None or limit <= 0:
                return []
            self._searches += 1
            if self._mem_max is None and self._searches == AUTO_WARM_AFTER:
                # Searched again through the same object: a long-lived process (MCP, a library user, a
                # benchmark). Loading the copy costs about one LanceDB search, so a one-shot CLI recall
                # never pays it. The version is checked on every search (well under a millisecond).
                self.enable_memory_cache(max_rows=AUTO_WARM_ROWS, recheck_s=0.0)
            mem = self._memory()
            if mem is not None:
                return self._search_memory(mem, query_vector, where, limit)
            query = tbl.search(query_vector, vector_column_name="vector").distance_type("cosine")
            sql = to_sql(where)
            if sql:
                query = query.where(sql, prefilter=True)
            if self._has_vector_index(tbl):
                # An ANN index searches a few partitions; with a narrow filter those may hold fewer than
                # `limit` matches, so allow probing as many partitions as it takes (0 = no maximum).
                query = query.maximum_nprobes(0).refine_factor(4)
            result = query.select(["passage_id", "note_path", "_distance"]).limit(limit).to_arrow()
            ids = result.column("passage_id").to_pylist()
            paths = result.column("note_path").to_pylist()
            distances = result.column("_distance").to_numpy()
            return [
                VecHit(pid, path, float(np.clip(1.0 - dist, -1.0, 1.0)))
                for pid, path, dist in zip(ids, paths, distances, strict=True)
            ]

    def passage_ids(self) -> set[str]:
        return set(self.passage_hashes())

    def passage_hashes(self) -> dict[str, str]:
        """passage_id -> text_hash of every stored row (to decide what needs re-embedding)."""
        rows = self._scan(["passage_id", "text_hash"], None)
        return dict(
            zip(rows.column("passage_id").to_pylist(), rows.column("text_hash").to_pylist(), strict=True)
        )

    def rows_for(self, note_paths: Iterable[str], *, with_vectors: bool = False) -> list[dict[str, Any]]:
        """Stored rows of these notes (without the vector unless asked)."""
        paths = tuple(sorted(set(note_paths)))
        if not paths:
            return []
        columns = list(FIELDS) + (["vector"] if with_vectors else [])
        out: list[dict[str, Any]] = []
        for start in range(0, len(paths), _DELETE_CHUNK):
            out.extend(self._scan(columns, In("note_path", paths[start : start + _DELETE_CHUNK])).to_pylist())
        return out

    def _scan(self, columns: list[str], where: Pred | None) -> Any:
        with self._guard():
            import pyarrow as pa

            tbl = self._table(create=False)
            if tbl is None:
                return pa.table({name: pa.array([], pa.string()) for name in columns})
            query = tbl.search().select(columns)
            sql = to_sql(where)
            if sql:
                query = query.where(sql)
            # A plain scan: limit(None) lifts the default limit of 10 on non-vector queries.
            return query.limit(None).to_arrow()

    # ------------------------------------------------------------------ maintenance

    def _has_vector_index(self, tbl: Any) -> bool:
        try:
            return any("vector" in idx.columns for idx in tbl.list_indices())
        except Exception:
            return False

    def optimize(
        self, *, index_threshold: int = INDEX_THRESHOLD, cleanup_older_than: timedelta | None = None
    ) -> None:
        """Compact small files, prune versions older than ``cleanup_older_than`` (LanceDB default:
        7 days, so readers in other processes never lose the version they are on), and build an
        IVF_PQ index once the table has ``index_threshold`` rows (existing indexes absorb new rows)."""
        tbl = self._table(create=False)
        if tbl is None:
            return
        if cleanup_older_than is None:
            tbl.optimize()
        else:
            tbl.optimize(cleanup_older_than=cleanup_older_than)
        rows = tbl.count_rows()
        if rows >= index_threshold and not self._has_vector_index(tbl):
            from lancedb.index import IvfPq

            # Partition count is left to LanceDB, which sizes partitions from the row count.
            sub_vectors = next(
                n for n in (self.dim // 8, self.dim // 4, self.dim // 2, self.dim) if n and self.dim % n == 0
            )
            tbl.create_index("vector", config=IvfPq(distance_type="cosine", num_sub_vectors=sub_vectors))

    def drop_other_tables(self) -> list[str]:
        """Drop vector tables of every other pack key (after a model change); returns their names."""
        db = self._connect()
        names: list[str] = []
        page_token = None
        while True:
            page = db.list_tables(page_token=page_token)
            names.extend(page.tables)
            page_token = page.page_token
            if not page_token:
                break
        dropped = [name for name in names if name.startswith("passages_") and name != self.name]
        for name in dropped:
            db.drop_table(name)
        return dropped


def _keyword(value: Any) -> str:
    return "" if value is None else str(value)


MASKS_KEPT = 32  # boundaries per table version: a vault's readers ask with a handful (agent x scope)


def _rows(where: Pred | None, cols: dict[str, Any], n: int, memo: dict[Any, Any]) -> Any:
    """The row numbers inside ``where``, kept per boundary for this copy of the table: the prompt hook
    asks with the same agent and scope every time, and evaluating the predicate over 13k rows of
    strings cost more than the search itself."""
    try:
        hit = memo.get(where)
    except TypeError:  # a predicate holding a list: not hashable, so not kept
        return np.flatnonzero(_mask(where, cols, n))
    if hit is None:
        hit = np.flatnonzero(_mask(where, cols, n))
        if len(memo) >= MASKS_KEPT:
            memo.clear()
        memo[where] = hit
    return hit


def _mask(p: Pred | None, cols: dict[str, Any], n: int) -> Any:
    """Evaluate a boundary predicate over column arrays (the in-memory twin of `to_sql`)."""
    from .predicates import And, Eq, In, Not, Or, Range

    if p is None:
        return np.ones(n, dtype=bool)
    if isinstance(p, Eq):
        return cols[p.field] == (int(p.value) if p.field == "date" else str(p.value))
    if isinstance(p, In):
        vals = [int(v) for v in p.values] if p.field == "date" else [str(v) for v in p.values]
        return np.isin(cols[p.field], vals)
    if isinstance(p, Range):
        m = np.ones(n, dtype=bool)
        if p.lo is not None:
            m &= cols[p.field] >= p.lo
        if p.hi is not None:
            m &= cols[p.field] <= p.hi
        return m
    if isinstance(p, And):
        m = np.ones(n, dtype=bool)
        for x in p.parts:
            m &= _mask(x, cols, n)
        return m
    if isinstance(p, Or):
        m = np.zeros(n, dtype=bool)
        for x in p.parts:
            m |= _mask(x, cols, n)
        return m
    if isinstance(p, Not):
        return ~_mask(p.part, cols, n)
    raise TypeError(f"not a predicate: {p!r}")


# A REST client for remote namespaces, imported by ``lance_namespace`` (which ``lancedb`` imports) for
# its pydantic models: its package's ``__init__`` also imports every API module, which a local table
# never uses and which were half of ``import lancedb`` (0.65 of 1.3 CPU-s, measured; issue 26).
REST_CLIENT = "lance_namespace_urllib3_client"


def import_lancedb() -> Any:
    """``import lancedb``, with :data:`REST_CLIENT`'s package ``__init__`` run only when something uses
    a name it defines (never, for a local table); its ``models`` subpackage is imported as before."""
    if "lancedb" not in sys.modules:
        _defer_package_init(REST_CLIENT)
    import lancedb

    return lancedb


def _defer_package_init(name: str) -> None:
    """Put package ``name`` in ``sys.modules`` without running its ``__init__`` (so importing one of
    its subpackages does not import the rest); the first lookup of any other name on it runs it."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    mod = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attr: str) -> Any:  # PEP 562: called only for names the module does not have yet
        mod.__dict__.pop("__getattr__", None)
        loader.exec_module(mod)
        return getattr(mod, attr)

    mod.__dict__["__getattr__"] = __getattr__  # PEP 562: the module's own __getattr__
    sys.modules[name] = mod
