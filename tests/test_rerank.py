"""The second model (search/rerank.py): installed from its package, kept apart from the embedding pack,
re-ordering the first pass's top candidates for English questions only, deciding abstention where it
ran, and read ahead by a warm process. Real model, small data; one fusion unit test with made-up ranks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hive_brain.embedding import install as pack_install
from hive_brain.embedding.pack import RERANK_DIR, RERANK_PACK_ID, find_pack, find_reranker
from hive_brain.engine import Engine
from hive_brain.errors import ModelError
from hive_brain.search import rerank
from hive_brain.search.candidates import Cand
from hive_brain.search.features import Features

from .test_recall_small_vault import _remember_all


def test_the_reranker_installs_once_beside_the_pack_and_is_never_taken_for_it(tmp_path: Path, pack_dir: Path):
    models = tmp_path / "models"
    rr = pack_install.install_reranker(models)
    assert rr == models / RERANK_DIR / RERANK_PACK_ID and find_reranker(models) == rr
    stamp = (rr / "manifest.json").stat().st_mtime_ns
    assert pack_install.install_reranker(models) == rr and (rr / "manifest.json").stat().st_mtime_ns == stamp
    # Only the reranker there: no embedding pack (before, any complete child folder counted).
    assert find_pack(models) is None
    shutil.copytree(pack_dir, models / pack_dir.name)
    assert find_pack(models) == models / pack_dir.name


def test_a_model_file_that_is_not_the_expected_one_is_refused(tmp_path: Path, monkeypatch):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(pack_install, "rerank_model_path", lambda: fake)
    with pytest.raises(ModelError, match="sha256 differs"):
        pack_install.install_reranker(tmp_path / "models")
    assert find_reranker(tmp_path / "models") is None


@pytest.mark.parametrize(("text", "english"), [
    ("which cloud runs our website?", True), ("how should I word my git log entries?", True),
    ("Welche Python-Version verwenden unsere Dienste?", False), ("预发布环境的地址是什么？", False),
    ("zorbulator cache", False), ("APIのレート制限はいくつですか？", False)])
def test_only_english_questions_are_reranked(text: str, english: bool):
    assert rerank.english(text) is english


def _cand(path: str, sim: float | None, score: float) -> Cand:
    return Cand(path, features=Features(rr_sim=sim), score=score)


def test_fusion_moves_only_what_the_second_model_read_and_keeps_the_scores_in_place():
    # "conv" was not read (a conversation): it keeps its second place; the others trade places.
    ranked = [_cand("a", 0.30, 1.0), _cand("conv", None, 0.9), _cand("b", 0.70, 0.8), _cand("c", 0.32, 0.7),
              _cand("tail", 0.9, 0.1)]
    out = rerank.fuse(ranked, {"rr_top": 4, "rrf_k": 10.0, "w_rr": 0.4})
    # a: 1/10 + .4*.30 = .220; b: 1/12 + .4*.70 = .363; c: 1/13 + .4*.32 = .205
    assert [c.path for c in out] == ["b", "conv", "a", "c", "tail"]
    assert [c.score for c in out] == [1.0, 0.9, 0.8, 0.7, 0.1]  # the k-th place keeps the k-th score
    assert out[0].details["firstPassRank"] == 2 and "firstPassRank" not in out[1].details


def _count_model_runs(model, monkeypatch) -> list[int]:
    """The sizes of the model's passage batches from here on."""
    calls: list[int] = []
    real = model.embed_passages

    def counting(texts, **kw):
        calls.append(len(texts))
        return real(texts, **kw)

    monkeypatch.setattr(model, "embed_passages", counting)
    return calls


@pytest.fixture
def small(vault_path: Path, with_model: Path):
    eng = Engine.open(vault_path)
    return eng, _remember_all(eng)


def test_a_paraphrase_the_first_pass_ranked_wrong_is_first_after_the_second(small, monkeypatch):
    """"how should I word my git log entries?" shares no word with the Commit messages memory: the first
    pass put the README first; the second model reads it as the question it is."""
    from hive_brain.search.params import PARAMS

    eng, ids = small
    q = "how should I word my git log entries?"
    res = eng.recall(q, limit=3)
    assert not res["abstained"] and res["hits"][0]["id"] == ids["Commit messages"]
    d = res["hits"][0]["scoreDetails"]
    assert d["rerankRank"] == 0 and d["rerankGap"] > 0 and "rerankMs" in res["timing"]
    monkeypatch.setitem(PARAMS, "w_rr", 0.0)
    res = eng.recall(q, limit=3, abstain=False)
    assert res["hits"][0]["id"] != ids["Commit messages"]


def test_a_question_in_another_language_keeps_the_first_pass(small):
    eng, ids = small
    res = eng.recall("预发布环境的地址是什么？", limit=3)
    assert "rerankMs" in res["timing"]  # the pass ran, and left a question it cannot read alone
    assert all(h["scoreDetails"].get("rerankRank") is None for h in res["hits"])
    assert res["hits"][0]["id"] == ids["Staging URL"]


def test_read_ahead_leaves_nothing_for_a_question_to_compute(small, monkeypatch):
    """What a warm server does in idle moments: afterwards a recall runs the model on the question only."""
    eng, ids = small
    view = eng.view()
    model = rerank.model_for(view.embedder)
    assert model is not None
    rerank._CACHE.clear()
    assert rerank.warm(model, view.lexical, rerank.warm_order(view.catalog)) >= len(ids)
    calls = _count_model_runs(model, monkeypatch)
    res = eng.recall("which cloud runs our website?", view=view, limit=3)
    assert res["hits"][0]["id"] == ids["Hosting"] and calls == []


def test_a_server_reads_ahead_for_the_reranker_and_answers_with_it(vault_path: Path, with_model: Path):
    """A real `serve` process: ready first, then it reads the memories' passages ahead in idle moments
    (``rerankAhead`` counts down to 0 in ``status``), and its recalls carry the second model's ranks."""
    import os
    import subprocess
    import sys
    import time

    from hive_brain.config import resolve
    from hive_brain.rpc import client
    from hive_brain.store.vault import open_vault

    eng = Engine.open(vault_path)
    ids = _remember_all(eng)
    state = open_vault(resolve()).state
    env = dict(os.environ)
    try:
        subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--detach"], capture_output=True, timeout=120,
                       env=env, check=True)
        deadline = time.monotonic() + 120
        st: dict = {}
        while time.monotonic() < deadline:
            if client.server_ready(state):
                st = client.call(state, "status", timeout=10.0)
                if st["semantic"]["reranker"] and st["semantic"]["rerankAhead"] == 0:
                    break
            time.sleep(0.2)
        assert st.get("semantic", {}).get("reranker") and st["semantic"]["rerankAhead"] == 0, st.get("semantic")
        res = client.call(state, "recall", {"query": "how should I word my git log entries?", "limit": 3}, timeout=30)
        assert res["hits"][0]["id"] == ids["Commit messages"] and res["hits"][0]["scoreDetails"]["rerankRank"] == 0
    finally:
        subprocess.run([sys.executable, "-m", "hive_brain", "serve", "--stop"], capture_output=True, timeout=60, env=env)


def test_read_ahead_is_kept_on_disk_so_a_restarted_process_reads_it_back(small, monkeypatch):
    """Before, the passages' vectors lived in memory only: every server start ran the model over the
    whole vault again (over ten minutes at 10k notes), and prompts meanwhile paid for their own."""
    from hive_brain.index.embcache import EmbeddingCache

    eng, ids = small
    view = eng.view()
    model = rerank.model_for(view.embedder)
    entries = rerank.warm_order(view.catalog)
    rerank._CACHE.clear()
    store = EmbeddingCache(eng.vault.state / "embcache.sqlite")
    first = rerank.warm(model, view.lexical, entries, store=store)
    assert first >= len(ids) and store.count(model.pack_key) == first
    rerank._CACHE.clear()  # a new process
    monkeypatch.setattr(model, "embed_passages", lambda *a, **k: pytest.fail("the model ran again"))
    assert rerank.warm(model, view.lexical, entries, store=store) == first  # new to memory, read from disk
    res = eng.recall("which cloud runs our website?", view=view, limit=3)
    assert res["hits"][0]["id"] == ids["Hosting"]
    store.close()


def test_a_bounded_question_computes_only_its_best_placed_cold_passages(small, monkeypatch):
    from hive_brain.search.recall import search

    eng, ids = small
    view = eng.view()
    model = rerank.model_for(view.embedder)
    rerank._CACHE.clear()
    rerank.background(model)  # computed once per process: counted here only when this test runs alone
    calls = _count_model_runs(model, monkeypatch)
    res = search(view, "how should I word my git log entries?", agent=None, limit=3, abstain=False, rerank_cold=2)
    assert sum(calls) == 2  # two passages, not the top 30's
    read = [h for h in res["hits"] if h["scoreDetails"].get("rerankRank") is not None]
    assert len(read) <= 2
    calls.clear()
    full = search(view, "how should I word my git log entries?", agent=None, limit=3)
    assert sum(calls) > 2 and full["hits"][0]["id"] == ids["Commit messages"]


def test_a_deep_recall_before_the_read_ahead_computes_its_bound_and_says_so(small, monkeypatch):
    """Right after a server start (nothing read ahead) deep mode ran the second model over its whole top
    100 itself: 5.7-7.1 s at 3,077 notes (benchmarks/deep_latency.py --cold). With a bound, the whole
    request (the fast verdict and the deep pass) computes at most that many passages; the cold rest keep
    their first-pass places, marked, with a warning. Before: 2 per pass (4 here), no mark, no warning."""
    from hive_brain.search.recall import search

    eng, ids = small
    view = eng.view()
    model = rerank.model_for(view.embedder)
    rerank.background(model)
    q = "how should I word my git log entries?"
    calls = _count_model_runs(model, monkeypatch)
    for abstain in (True, False):  # with and without the fast verdict before the deep pass
        rerank._CACHE.clear()
        calls.clear()
        res = search(view, q, agent=None, limit=20, deep=True, rerank_cold=2, abstain=abstain, drop_ratio=0.0)
        assert sum(calls) == 2, abstain
        assert [w for w in res["warnings"] if w.startswith("deep mode:")], res["warnings"]
    cold = [h for h in res["hits"] if h["scoreDetails"].get("rerankCold")]
    assert cold and all(h["scoreDetails"].get("rerankRank") is None for h in cold)
    assert [w for w in res["warnings"] if f" {len(cold)} of the top" in w], res["warnings"]
    full = search(view, q, agent=None, limit=20, deep=True, abstain=False, drop_ratio=0.0)
    assert not any(h["scoreDetails"].get("rerankCold") for h in full["hits"]) and not full["warnings"]
    assert full["hits"][0]["id"] == ids["Commit messages"]


def test_a_server_bounds_the_model_time_of_a_deep_recall():
    """The server's deep recalls and answers carry the bound (the prompt hook's is its own); others none."""
    from types import SimpleNamespace

    from hive_brain.daemon import sockets

    stub = SimpleNamespace(_caller=lambda args: None)
    assert sockets.SocketServer.read_args(stub, {"query": "q", "deep": True})[3]["rerank_cold"] == sockets.DEEP_RERANK_COLD
    assert "rerank_cold" not in sockets.SocketServer.read_args(stub, {"query": "q"})[3]
