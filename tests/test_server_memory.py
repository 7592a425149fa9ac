"""What keeps a long-running server's memory bounded (issue 26): bounded caches, the C heap's
arenas and trimming, and the options the server's ONNX sessions are built with. Nothing is timed
here; benchmarks/server_rss.py measures the RSS."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from hive_brain.daemon import memory
from hive_brain.embedding.embedder import _load_session
from hive_brain.search import late, rerank
from hive_brain.search.textcache import TextCache


def test_text_cache_is_bounded_by_bytes_not_only_by_count() -> None:
    cache = TextCache(1000, max_bytes=10 * 384 * 2 * 100)  # room for 10 passages of 100 tokens
    big = lambda todo: [np.ones((100, 384), dtype=np.float32) for _ in todo]  # noqa: E731
    cache.get("k", [f"passage {i}" for i in range(25)], big)
    assert len(cache) == 10 and cache.nbytes == 10 * 100 * 384 * 2
    # the least recently used went first: the last ten stay, a hit moves one to the end
    assert cache.key("k", "passage 24") in cache and cache.key("k", "passage 14") not in cache
    cache.get("k", ["passage 15"], big)
    cache.get("k", ["new one"], big)
    assert cache.key("k", "passage 15") in cache and cache.key("k", "passage 16") not in cache
    cache.clear()
    assert cache.nbytes == 0 and len(cache) == 0


def test_the_servers_vector_caches_have_a_byte_bound() -> None:
    # per-token vectors are 768 bytes a token: 20,000 passages of 512 tokens would be 7.5 GB
    assert late._CACHE.max_bytes is not None and late._CACHE.max_bytes <= 128 << 20
    assert rerank._CACHE.max_items * 384 * 2 <= 64 << 20  # one pooled float16 vector per passage


def test_the_models_sessions_keep_no_arena_between_runs(pack_dir: Path) -> None:
    # The CPU arena and the memory pattern keep the largest run's tensors for the session's life: in a
    # warm server, hundreds of MB after the reranker's first batches (benchmarks/server_rss.py).
    options = _load_session(pack_dir, 1).get_session_options()
    assert options.enable_cpu_mem_arena is False
    assert options.enable_mem_pattern is False


@pytest.mark.skipif(memory._LIBC is None, reason="not glibc: the heap is left to the platform")
def test_the_heap_levers_reach_glibc() -> None:
    assert memory.limit_arenas(memory.ARENAS) is True
    memory.trim()  # no error; whether pages were released depends on the heap


def test_the_server_trims_its_heap_once_quiet_after_work(vault_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hive_brain.config import resolve
    from hive_brain.daemon.server import Server

    calls: list[int] = []
    monkeypatch.setattr(memory, "trim", lambda: calls.append(1) or True)
    srv = Server(resolve(), log_to_stderr=False)
    srv.sockets.last_active = time.monotonic() - 60
    done = srv._trim_heap(None)
    assert calls == [1]
    assert srv._trim_heap(done) == done and calls == [1]  # nothing new happened: no second trim
    srv.sockets.stats["requests"] += 1
    srv.sockets.last_active = time.monotonic()  # a request just now: not quiet yet
    assert srv._trim_heap(done) == done and calls == [1]
    srv.sockets.last_active = time.monotonic() - 60
    assert srv._trim_heap(done) != done and calls == [1, 1]


def test_an_idle_server_releases_its_batch_sessions_though_resync_catch_ups_go_on(
        vault_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to embed or read ahead and no request for BATCH_IDLE_S: the models' batch sessions go.
    The resync catch-up that finds nothing (every 30 s) is not work: counted as work, it kept the
    server from ever being idle that long, and the sessions were never released (server_rss, 1k)."""
    from hive_brain.config import resolve
    from hive_brain.daemon import server as server_mod
    from hive_brain.daemon.indexing import Snapshot
    from hive_brain.daemon.server import BATCH_IDLE_S, LIFE_CHECK_S, Server

    monkeypatch.setattr(memory, "trim", lambda: True)
    srv = Server(resolve(), log_to_stderr=False)
    released: list[float] = []
    clock = [1000.0]
    monkeypatch.setattr(srv.indexing, "release_batch_sessions",
                        lambda: not released and (released.append(clock[0]) or True))
    srv.indexing.snap = Snapshot(generation=3, lexical=None, vectors=None, embedder=None, semantic_off=None)
    srv.sockets.last_active = clock[0] - 60
    monkeypatch.setattr(server_mod.time, "monotonic", lambda: clock[0])
    done = None
    start = clock[0]
    while clock[0] - start < 3 * BATCH_IDLE_S:
        done = srv._trim_heap(done)
        srv.indexing.cycles += 1  # a catch-up ran and found nothing
        clock[0] += LIFE_CHECK_S
    monkeypatch.undo()
    assert len(released) == 1 and BATCH_IDLE_S <= released[0] - start <= BATCH_IDLE_S + 2 * LIFE_CHECK_S, released


def test_the_word_table_is_read_from_the_model_file_not_copied_into_each_session(pack_dir: Path) -> None:
    # e5's 250k-token table is 54 of the model's 68 MB and a question reads a dozen rows of it: each
    # session copied all of it (benchmarks/server_rss.py, issue 26). Mapped from model.onnx instead.
    import onnx
    from onnx import numpy_helper

    from hive_brain.embedding import onnxmap
    from hive_brain.embedding.embedder import Embedder

    model = pack_dir / "model.onnx"
    tables = onnxmap.lookup_tables(model)
    proto = {i.name: i for i in onnx.load(str(model)).graph.initializer}
    assert {t.name for t in tables} == {"emb.word.qs", "emb.word.d"}  # the table and its scales, nothing else
    raw = model.read_bytes()
    for t in tables:  # the walker's offsets are where onnx finds the same bytes
        assert raw[t.offset:t.offset + t.size] == proto[t.name].raw_data
        assert list(t.dims) == list(proto[t.name].dims)
    assert numpy_helper.to_array(proto["emb.word.d"]).shape == (250037, 12)

    session = _load_session(pack_dir, 1)
    assert len(session.mapped_tables) == 2
    mapped = Embedder.load(pack_dir)
    texts = ["how do we deploy the web app?", "Wie wird die Datenbank gesichert?", "z" * 300]
    got = mapped.embed_passages(texts)
    assert np.array_equal(mapped.embed_passages(texts), got)


def test_without_the_mapping_the_vectors_are_the_same(pack_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hive_brain.embedding import onnxmap
    from hive_brain.embedding.embedder import Embedder

    texts = ["how do we deploy the web app?", "Wie wird die Datenbank gesichert?"]
    mapped = Embedder.load(pack_dir).embed_passages(texts)
    monkeypatch.setattr(onnxmap, "MIN_BYTES", 1 << 62)  # no table is worth a mapping
    plain = Embedder.load(pack_dir)
    assert len(plain._session.mapped_tables) == 0
    assert np.array_equal(plain.embed_passages(texts), mapped)


def test_a_model_file_the_walker_cannot_read_maps_nothing(tmp_path: Path) -> None:
    from hive_brain.embedding import onnxmap

    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x3a\xff\xff\xff\xff\x0f" + b"\x00" * 64)  # a graph field longer than the file
    assert onnxmap.lookup_tables(bad) == []


def _reranker(pack_dir: Path) -> Path:
    from hive_brain.embedding.pack import RERANK_DIR, RERANK_PACK_ID

    return pack_dir.parent / RERANK_DIR / RERANK_PACK_ID


def test_the_rerankers_int8_word_table_is_read_from_the_file_and_only_its_rows_dequantized(
        pack_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # MiniLM's int8 table is dequantized in the graph (Cast, Mul by per-row scales, Gather): ONNX Runtime
    # folded that into a float32 table of 47 MB in each of its two sessions (issue 26, stop 38). The
    # session now loads the graph with the gather first and maps the int8 table from model.onnx.
    import onnx

    from hive_brain.embedding import onnxmap
    from hive_brain.embedding.embedder import Embedder

    model = _reranker(pack_dir) / "model.onnx"
    word = "inner.embeddings.word_embeddings.weight"
    (table,) = onnxmap.lookup_tables(model)
    proto = {i.name: i for i in onnx.load(str(model)).graph.initializer}
    assert table.name == f"{word}_q" and list(table.dims) == [30522, 384]
    assert model.read_bytes()[table.offset:table.offset + table.size] == proto[table.name].raw_data

    session = _load_session(model.parent, 1)
    assert len(session.mapped_tables) == 1 and session.mapped_tables.rewritten
    # nor are the rewritten model's 23 MB kept with the session (onnxruntime kept them)
    assert session.mapped_tables._model is None and getattr(session, "_model_bytes", None) is None
    _tables, loaded = onnxmap._read(model, onnxmap.MIN_BYTES, rewrite=True)
    assert loaded is not None
    graph = onnx.load_from_string(loaded).graph
    onnx.checker.check_graph(graph)
    assert not [n for n in graph.node if word in n.output]  # the float table is no longer made
    assert not [v for v in graph.value_info if v.name in (word, f"{word}_f")]

    texts = ["which cloud runs our website?", "The web app is deployed on Fly.io", "deploy " * 200,
             "Wie wird die Datenbank gesichert?", ""]
    mapped = Embedder.load(model.parent)
    mapped.enable_single_session()
    got = (mapped.embed_passages(texts, batch_size=32), mapped.embed_queries(texts[:1]),
           mapped.token_vectors(texts[:2], query=False))
    monkeypatch.setattr(onnxmap, "MIN_BYTES", 1 << 62)
    plain = Embedder.load(model.parent)
    plain.enable_single_session()
    assert not plain._session.mapped_tables.rewritten and len(plain._single.mapped_tables) == 0
    want = (plain.embed_passages(texts, batch_size=32), plain.embed_queries(texts[:1]),
            plain.token_vectors(texts[:2], query=False))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])  # bit for bit
    assert all(np.array_equal(a, b) for a, b in zip(got[2], want[2], strict=True))


def _dequantized_model(path: Path, scale_shape: tuple[int, ...], *, other_reader: bool = False) -> None:
    """A table of int8 rows dequantized in the graph, then read by two Gathers (and by a ReduceSum
    too when ``other_reader``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    q = rng.integers(-127, 128, size=(4096, 300), dtype=np.int8)  # 1.2 MB: worth a mapping
    scale = rng.uniform(1e-3, 1e-2, size=scale_shape).astype(np.float32)
    nodes = [helper.make_node("Cast", ["t_q"], ["t_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["t_scale", "t_f"], ["t"]),
             helper.make_node("Gather", ["t", "ids"], ["a"], axis=0),
             helper.make_node("Gather", ["t", "ids2"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["out"])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    if other_reader:
        nodes.append(helper.make_node("ReduceSum", ["t"], ["total"], keepdims=0))
        outputs.append(helper.make_tensor_value_info("total", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.INT64, [None, None]) for n in ("ids", "ids2")],
        outputs, initializer=[numpy_helper.from_array(q, "t_q"), numpy_helper.from_array(scale, "t_scale")],
        value_info=[helper.make_tensor_value_info("t", TensorProto.FLOAT, [4096, 300])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("scale_shape", [(4096, 1), (1,), (300,), (1, 300), ()])
def test_a_dequantized_table_read_by_two_gathers_gives_the_same_values_gathered_first(
        tmp_path: Path, scale_shape: tuple[int, ...]) -> None:
    import onnxruntime as ort

    from hive_brain.embedding import onnxmap

    path = tmp_path / "model.onnx"
    _dequantized_model(path, scale_shape)
    feed = {"ids": np.array([[0, 5, 4095, 5]]), "ids2": np.array([[17, 3, 2, 1]])}
    options = ort.SessionOptions()
    tables = onnxmap.MappedTables(path, options, ort)
    assert len(tables) == 1 and tables.rewritten
    got = ort.InferenceSession(tables.take_model(), options, providers=["CPUExecutionProvider"]).run(None, feed)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)
    assert np.array_equal(got[0], want[0])


def test_a_dequantized_table_something_else_reads_is_left_in_the_graph(tmp_path: Path) -> None:
    from hive_brain.embedding import onnxmap

    path = tmp_path / "model.onnx"
    _dequantized_model(path, (4096, 1), other_reader=True)
    assert onnxmap.lookup_tables(path) == []
    assert onnxmap._read(path, onnxmap.MIN_BYTES, rewrite=True) == ([], None)
