"""The embedder: an embedding pack run by onnxruntime on CPU, tokenised by ``tokenizers`` (or, for
a SentencePiece-Unigram pack like the default one, by :mod:`.spmtok`'s mapped piece table with the same ids).

Only imported when semantic search is used, so numpy / onnxruntime / tokenizers stay out of the
light paths (CLI start-up, the prompt hook).  Every vector is float32, unit length, and tagged by
the caller with :attr:`Embedder.pack_key`; vectors from different keys are never compared.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..errors import ModelError
from . import onnxmap, spmtok
from . import pack as modelpack


def _import_onnxruntime() -> Any:
    """onnxruntime writes a device id under ``$XDG_CACHE_HOME/Microsoft/DeveloperTools/`` (else
    ``~/.cache``) when it is imported: point it into hive-brain's own cache dir, so nothing lands
    outside the vault, the state dir and hive-brain's caches. The variable is restored at once."""
    from ..config import user_cache_dir

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(user_cache_dir() / "runtime")
    try:
        import onnxruntime
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old
    return onnxruntime


ort = _import_onnxruntime()

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each batch."""

# Upper bound on batch * seq_len**2, i.e. on the size of the per-layer attention score tensors
# (times the number of heads). 16 x 256^2 keeps them near 50 MB for a 12-head model; batches of
# long passages get smaller instead of spiking memory.
_ATTENTION_BUDGET = 16 * 256 * 256
# A token never covers this many characters in practice; cutting longer texts first keeps a
# pathological multi-megabyte passage from costing seconds of tokenisation before truncation.
_CHARS_PER_TOKEN_CAP = 64
# With the batch session released (:meth:`Embedder.release_batch_session`), runs of up to this many
# texts go to the one-thread question session instead of loading it again: a request's few cold
# candidates (the prompt op computes at most 6) never pay a session load.
SMALL_BATCH = 8


class Embedder:
    """One loaded pack.  Thread-safe for concurrent ``embed_*`` calls (onnxruntime sessions are)."""

    def __init__(
        self,
        pack_dir: Path,
        manifest: dict[str, Any],
        session: Any,
        tokenizer: Tokenizer | spmtok.SpmTokenizer,
        *,
        pad_id: int = 0,
        check_dim: bool = True,
        threads: int = 2,
    ) -> None:
        self.pack_dir = pack_dir
        self._threads = threads  # the batch session's, to load it again after a release
        self.manifest = manifest
        self.pack_key: str = modelpack.pack_key(manifest)
        self.dim: int = int(manifest["dim"])
        self.max_tokens: int = int(manifest["max_tokens"])
        self.query_prefix: str = str(manifest.get("query_prefix") or "")
        self.passage_prefix: str = str(manifest.get("passage_prefix") or "")
        self.normalize: bool = bool(manifest.get("normalize", True))
        self.pooling: str = str(manifest.get("pooling", "mean"))
        # Off only while probing a model whose dimension is not known yet (modelpack.install_from).
        self.check_dim = check_dim
        self._session: Any = session  # None while released (release_batch_session)
        self._session_lock = threading.Lock()
        self._single: Any = None  # enable_single_session()
        self._tokenizer = tokenizer
        self._pad_id = pad_id
        self._inputs = {i.name: i.type for i in session.get_inputs()}
        unknown = set(self._inputs) - {"input_ids", "attention_mask", "token_type_ids"}
        if "input_ids" not in self._inputs or unknown:
            raise ModelError(
                f"the model in {pack_dir} has unsupported inputs {sorted(self._inputs)}; "
                "expected input_ids, attention_mask and optionally token_type_ids"
            )
        outputs = {o.name: o for o in session.get_outputs()}
        self._outputs = set(outputs)
        wanted = manifest.get("output")
        if wanted and wanted not in outputs:
            raise ModelError(f"the model in {pack_dir} has no output {wanted!r} (has {sorted(outputs)})")
        name = wanted or ("sentence_embedding" if "sentence_embedding" in outputs else next(iter(outputs)))
        self._output = name
        # A rank-3 output is per-token hidden states that we pool here; rank 2 is already pooled.
        self._output_is_tokens = len(outputs[name].shape or ()) == 3

    @classmethod
    def load(cls, pack_dir: Path, *, threads: int | None = None, check_dim: bool = True) -> Embedder:
        """Load a pack; ModelError (saying what to do) if it is missing, incomplete or will not load.

        Only the cheap size check runs here; ``modelpack.verify`` does the full hash check.
        """
        pack_dir = Path(pack_dir)
        problems = modelpack.verify(pack_dir, full=False)
        if problems:
            hint = (
                modelpack.INSTALL_HINT
                if not (pack_dir / modelpack.MANIFEST).exists()
                else modelpack.REINSTALL_HINT
            )
            raise ModelError(f"embedding pack {pack_dir} is unusable: {problems[0]}", hint=hint)
        manifest = modelpack.read_manifest(pack_dir)
        threads = threads or min(2, os.cpu_count() or 1)
        session = _load_session(pack_dir, threads)
        tokenizer, pad_id = _load_tokenizer(pack_dir, manifest)
        return cls(pack_dir, manifest, session, tokenizer, pad_id=pad_id, check_dim=check_dim, threads=threads)

    def enable_single_session(self) -> None:
        """Run one-text inputs (a question) on a second, single-threaded session of the same model.

        For a warm server: a question is a dozen tokens, too little work to split, and two threads
        synchronising on a busy 2-core machine took twice as long as one (e5 48 -> 25 ms, MiniLM 22 ->
        9 ms per question at load 2-4, measured). Batches keep the shared session and its threads.
        Costs the model's memory once more (~100 MB for e5-small), so a one-shot process does not."""
        with self._session_lock:  # the server may load it from two threads at start
            if self._single is None:
                self._single = _load_session(self.pack_dir, 1)

    def release_batch_session(self) -> bool:
        """Drop the batch session while a one-thread question session answers (a warm server with
        nothing to embed): the model's memory once less (~70-85 MB each for e5-small and the
        reranker). The next large batch loads it again (~0.3 CPU-s); small ones run on the question
        session meanwhile. True if one was released."""
        with self._session_lock:
            if self._single is None or self._session is None:
                return False
            self._session = None
            return True

    def _batch_session(self) -> Any:
        session = self._session
        if session is None:
            with self._session_lock:
                if self._session is None:
                    self._session = _load_session(self.pack_dir, self._threads)
                session = self._session
        return session

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for search queries (query prefix added): float32 array (len(texts), dim)."""
        return self._embed([self.query_prefix + t for t in texts], batch_size=16, progress=None)

    def embed_passages(
        self, texts: Sequence[str], batch_size: int = 16, progress: Progress | None = None
    ) -> np.ndarray:
        """Vectors for indexed text (passage prefix added), in input order: float32 (len(texts), dim).

        Texts are batched by similar token length so little compute goes to padding; anything past
        ``max_tokens`` tokens is truncated.
        """
        return self._embed([self.passage_prefix + t for t in texts], batch_size=batch_size, progress=progress)

    def token_vectors(self, texts: Sequence[str], *, query: bool) -> list[np.ndarray]:
        """Unit-length per-token vectors (the model's hidden states before pooling), one float32
        array (tokens, dim) per text, without the special tokens and the query/passage prefix: the
        words of the text only. For late interaction (MaxSim) over a few candidates; empty arrays
        when the pack's model outputs only pooled vectors."""
        if not texts:
            return []
        if "last_hidden_state" not in self._outputs:
            return [np.zeros((0, self.dim), dtype=np.float32) for _ in texts]
        prefix = self.query_prefix if query else self.passage_prefix
        encodings = self._encode_with_offsets([prefix + self._cap(t) for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        out: list[np.ndarray] = [np.zeros((0, self.dim), dtype=np.float32)] * len(texts)
        for batch in _length_batches(np.argsort(lengths, kind="stable"), lengths, 16):
            hidden = self._run([encodings[i].ids for i in batch], output="last_hidden_state")
            for row, i in enumerate(batch):
                out[int(i)] = _text_tokens(hidden[row], encodings[int(i)], len(prefix))
        return out

    def count_tokens(self, text: str) -> int:
        """Tokens the passage would use, including special tokens (capped at max_tokens)."""
        return len(self._tokenizer.encode(self.passage_prefix + self._cap(text)).ids)

    # ------------------------------------------------------------------ internals

    def _encode_with_offsets(self, texts: list[str]) -> list[Any]:
        # spmtok fills offsets only when asked (they cost a second pass).
        if isinstance(self._tokenizer, spmtok.SpmTokenizer):
            return [self._tokenizer.encode(t, offsets=True) for t in texts]
        return self._tokenizer.encode_batch(texts)

    def _cap(self, text: str) -> str:
        return text[: self.max_tokens * _CHARS_PER_TOKEN_CAP]

    def _embed(self, texts: list[str], *, batch_size: int, progress: Progress | None) -> np.ndarray:
        total = len(texts)
        if not total:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch([self._cap(t) for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=total)
        order = np.argsort(lengths, kind="stable")
        done = 0
        results: list[tuple[np.ndarray, np.ndarray]] = []
        for batch in _length_batches(order, lengths, max(1, batch_size)):
            vectors = self._run([encodings[i].ids for i in batch])
            if self.check_dim and vectors.shape[1] != self.dim:
                raise ModelError(
                    f"the model in {self.pack_dir} produces {vectors.shape[1]}-d vectors, manifest says {self.dim}",
                    hint=modelpack.REINSTALL_HINT,
                )
            results.append((batch, vectors))
            done += len(batch)
            if progress is not None:
                progress(done, total)
        out = np.empty((total, results[0][1].shape[1]), dtype=np.float32)
        for batch, vectors in results:
            out[batch] = vectors
        return out

    def _feed(self, id_lists: list[list[int]]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        width = max(len(ids) for ids in id_lists)
        input_ids = np.full((len(id_lists), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(id_lists), width), dtype=np.int64)
        for row, ids in enumerate(id_lists):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        return {name: _as_input_type(feed[name], kind) for name, kind in self._inputs.items()}, mask

    def _session_run(self, outputs: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        try:
            n = len(feed["input_ids"])
            single = self._single is not None and (n == 1 or (self._session is None and n <= SMALL_BATCH))
            session = self._single if single else self._batch_session()
            return [np.asarray(r, dtype=np.float32) for r in session.run(outputs, feed)]
        except Exception as exc:
            raise ModelError(f"embedding failed in {self.pack_dir}: {_first_line(exc)}") from None

    def embed_query_tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The query's vector (as :meth:`embed_queries`) and its token vectors (as
        :meth:`token_vectors`) from one model run: the prompt path needs both and pays for one."""
        if "last_hidden_state" not in self._outputs or self._output == "last_hidden_state":
            return self.embed_queries([text])[0], self.token_vectors([text], query=True)[0]
        (enc,) = self._encode_with_offsets([self.query_prefix + self._cap(text)])
        feed, _mask = self._feed([enc.ids])
        pooled, hidden = self._session_run([self._output, "last_hidden_state"], feed)
        vec = pooled[0]
        if self.normalize:
            vec = vec / max(float(np.linalg.norm(vec)), 1e-12)
        return vec.astype(np.float32, copy=False), _text_tokens(hidden[0], enc, len(self.query_prefix))

    def _run(self, id_lists: list[list[int]], output: str | None = None) -> np.ndarray:
        feed, mask = self._feed(id_lists)
        (result,) = self._session_run([output or self._output], feed)
        if output is not None:
            return result  # raw, as asked
        if self._output_is_tokens:
            result = _pool(result, mask, self.pooling)
        if self.normalize:
            norms = np.linalg.norm(result, axis=1, keepdims=True)
            result = result / np.maximum(norms, 1e-12)
        return result.astype(np.float32, copy=False)


def _load_session(pack_dir: Path, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: warnings about unused initializers are noise
    # No CPU arena and no memory pattern: both keep the largest run's tensors for the session's life
    # (a warm server's four sessions held ~300 MB that way after the reranker's batches of 32). Freed
    # tensors go back to malloc instead, which the server trims when quiet (daemon/memory.py); recall
    # latency did not change (docs/benchmarks.md, issue 26).
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    try:
        # The word-embedding table read from the file in place, not copied into the session; the model
        # loaded is the file, or its graph with a quantized table's dequantization after the gather (onnxmap).
        tables = onnxmap.MappedTables(pack_dir / modelpack.MODEL_FILE, options, ort)
        session = ort.InferenceSession(tables.take_model(), sess_options=options, providers=["CPUExecutionProvider"])
        # onnxruntime's Python session keeps a model given as bytes for its whole life (its own TODO
        # says so) only to rebuild itself when a GPU provider fails over: 23 MB per reranker session.
        if getattr(session, "_model_bytes", None) is not None:
            session._model_bytes = None
        session.mapped_tables = tables  # the session reads them: they live (and are unmapped) with it
        return session
    except Exception as exc:  # onnxruntime raises its own, unexported exception types
        raise ModelError(
            f"cannot load {pack_dir / modelpack.MODEL_FILE}: {_first_line(exc)}", hint=modelpack.REINSTALL_HINT
        ) from None


def _load_tokenizer(pack_dir: Path, manifest: dict[str, Any]) -> tuple[Any, int]:
    """The pack's tokenizer and its padding id: spmtok's (a piece table mapped from a file) when it
    can reproduce the pack's ``tokenizer.json`` id for id (~9 MB, mostly clean file pages, instead
    of ~280 MB for e5's 250k-piece Unigram), else ``tokenizers`` itself."""
    from ..config import user_cache_dir

    path = pack_dir / modelpack.TOKENIZER_FILE
    max_tokens = int(manifest["max_tokens"])
    fast = spmtok.load(
        path,
        str(manifest["files"][modelpack.TOKENIZER_FILE]["sha256"]),
        [pack_dir, user_cache_dir() / "tokenizers"],
        max_tokens=max_tokens,
    )
    if fast is not None:
        return fast, fast.pad_id
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ModelError(f"cannot load {path}: {_first_line(exc)}", hint=modelpack.REINSTALL_HINT) from None
    pad_id = _pad_id(tokenizer)
    tokenizer.no_padding()  # we pad per batch ourselves, to the batch's longest sequence
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer, pad_id


def _length_batches(order: np.ndarray, lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Split indices (sorted by ascending length) into batches under the count and attention budgets."""
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and end - start < batch_size:
            longest = int(lengths[order[end]])  # ascending, so the newcomer is the longest
            if (end - start + 1) * longest * longest > _ATTENTION_BUDGET:
                break
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


def _text_tokens(hidden: np.ndarray, enc: Any, prefix_chars: int) -> np.ndarray:
    """The text's own tokens, unit length: not special, and ending past the prefix (the prefix's
    trailing space merges into the text's first piece)."""
    keep = [j for j, ((_a, end), special) in enumerate(zip(enc.offsets, enc.special_tokens_mask, strict=True))
            if not special and end > prefix_chars]
    tokens = hidden[keep]
    norms = np.linalg.norm(tokens, axis=1, keepdims=True)
    return (tokens / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    if pooling == "cls":
        return hidden[:, 0, :]
    if pooling == "mean":
        weights = mask[:, :, None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    raise ModelError(f"pooling {pooling!r} needs a pooled model output (rank 2), but the model gives tokens")


def _as_input_type(array: np.ndarray, onnx_type: str) -> np.ndarray:
    return array.astype(np.int32) if onnx_type == "tensor(int32)" else array


def _pad_id(tokenizer: Tokenizer) -> int:
    padding = tokenizer.padding
    if padding and padding.get("pad_id") is not None:
        return int(padding["pad_id"])
    for token in ("<pad>", "[PAD]"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    return 0  # masked out anyway; any valid id will do


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


_CACHE: dict[str, tuple[int, Embedder]] = {}
_CACHE_LOCK = threading.Lock()
_LOAD_LOCKS: dict[str, threading.Lock] = {}


def get_embedder(pack_dir: Path) -> Embedder:
    """The loaded embedder for a pack, reused while its manifest is unchanged (warm server path)."""
    pack_dir = Path(pack_dir)
    key = str(pack_dir.resolve())
    try:
        stamp = (pack_dir / modelpack.MANIFEST).stat().st_mtime_ns
    except OSError:
        stamp = -1
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        load_lock = _LOAD_LOCKS.setdefault(key, threading.Lock())
    # Loading under the pack's own lock: two threads asking for one pack at once must not load it
    # twice, and two packs (e5 and the reranker, at a server's start) load side by side.
    with load_lock:
        with _CACHE_LOCK:
            cached = _CACHE.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        embedder = Embedder.load(pack_dir)
        with _CACHE_LOCK:
            _CACHE[key] = (stamp, embedder)
        return embedder
