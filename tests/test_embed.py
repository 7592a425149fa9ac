"""The embedder on the real default pack, and the embedding cache."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from hive_brain.embedding.embedder import Embedder, get_embedder
from hive_brain.index.embcache import EmbeddingCache, embed_with_cache, text_hash

MEMORIES = [
    "Always use pnpm instead of npm for JavaScript dependencies",
    "The staging database is backed up every night at 2am UTC",
    "Run the linter with ruff before committing Python code",
    "Deploy the web service with docker compose on the build server",
    "The CI pipeline caches the Gradle build directory between runs",
    "Our team meeting moved to Thursday afternoons",
    "Use bcrypt with a cost factor of 12 to hash user passwords",
]
PNPM, BACKUP, MEETING, BCRYPT, DEPLOY = 0, 1, 5, 6, 3


@pytest.fixture(scope="module")
def embedder(pack_dir: Path) -> Embedder:
    return Embedder.load(pack_dir)


@pytest.fixture(scope="module")
def memory_vectors(embedder: Embedder) -> np.ndarray:
    return embedder.embed_passages(MEMORIES)


def _ranking(embedder: Embedder, query: str, passages: np.ndarray) -> list[int]:
    scores = passages @ embedder.embed_queries([query])[0]
    return [int(i) for i in np.argsort(-scores)]


def test_shapes_norms_and_dtype(embedder: Embedder) -> None:
    assert embedder.dim == 384
    assert embedder.pack_key.startswith("multilingual-e5-small-q4:")
    vectors = embedder.embed_passages(["one", "two words", "three words here"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    queries = embedder.embed_queries(["a query"])
    assert queries.shape == (1, 384)
    assert embedder.embed_passages([]).shape == (0, 384)
    assert embedder.embed_queries([]).shape == (0, 384)


def test_order_is_preserved_across_length_sorted_batches(embedder: Embedder) -> None:
    texts = [" ".join(["word"] * n) + f" item {n}" for n in (40, 3, 25, 1, 60, 7, 12)]
    seen: list[tuple[int, int]] = []
    batched = embedder.embed_passages(
        texts, batch_size=2, progress=lambda done, total: seen.append((done, total))
    )
    one_by_one = np.vstack([embedder.embed_passages([t]) for t in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=2e-5)
    assert seen[-1] == (7, 7) and len(seen) == 4


def test_query_and_passage_prefixes_differ(embedder: Embedder) -> None:
    text = "use pnpm for node projects"
    query, passage = embedder.embed_queries([text])[0], embedder.embed_passages([text])[0]
    assert not np.allclose(query, passage)


def test_long_text_is_truncated_not_rejected(embedder: Embedder) -> None:
    long_text = "deployment notes " * 3000
    assert embedder.count_tokens(long_text) == 512
    vector = embedder.embed_passages([long_text])
    assert vector.shape == (1, 384) and np.isfinite(vector).all()


def test_paraphrase_beats_unrelated_passages(embedder: Embedder, memory_vectors: np.ndarray) -> None:
    # No content word shared between the query and the memory it must find.
    ranking = _ranking(embedder, "which package manager should I use for node projects", memory_vectors)
    assert ranking[0] == PNPM
    ranking = _ranking(embedder, "how do I install packages", memory_vectors)
    assert ranking.index(PNPM) < ranking.index(MEETING)
    assert ranking.index(PNPM) < ranking.index(BACKUP)


def test_token_vectors_are_the_words_of_the_text(embedder: Embedder) -> None:
    """Late interaction's input: one unit vector per token of the text itself (no <s>, </s> or the
    query/passage prefix), and MaxSim ranks the paraphrase above unrelated memories."""
    from hive_brain.search.late import maxsim, maxsims

    text = "Always use pnpm instead of npm"
    (tokens,) = embedder.token_vectors([text], query=False)
    pieces = embedder._tokenizer.encode(text, add_special_tokens=False).ids
    assert tokens.shape == (len(pieces), 384) and tokens.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(tokens, axis=1), 1.0, atol=1e-4)
    assert embedder.token_vectors([], query=True) == []
    (q,) = embedder.token_vectors(["which package manager should I use for node projects"], query=True)
    passages = embedder.token_vectors(MEMORIES, query=False)
    sims = [maxsim(q, p) for p in passages]
    assert sims.index(max(sims)) == PNPM
    # Deep mode's one matrix product over every passage's tokens gives each passage's MaxSim (an empty
    # passage scores 0, as alone).
    empty = np.zeros((0, 384), dtype=np.float16)
    both = maxsims(q, [empty, *[p.astype(np.float16) for p in passages], empty])
    np.testing.assert_allclose(both[1:-1], [maxsim(q, p.astype(np.float16)) for p in passages], atol=1e-6)
    assert both[0] == both[-1] == 0.0 and maxsims(q, []) == [] and maxsims(q[:0], passages[:2]) == [0.0, 0.0]
    assert all(-1.0 <= s <= 1.0 for s in sims)
    # The prompt path's single run gives the same two things.
    qtext = "which package manager should I use for node projects"
    vec, toks = embedder.embed_query_tokens(qtext)
    np.testing.assert_allclose(vec, embedder.embed_queries([qtext])[0], atol=2e-5)
    np.testing.assert_allclose(toks, q, atol=2e-5)


def test_chinese_and_japanese_queries(embedder: Embedder, memory_vectors: np.ndarray) -> None:
    # Same language, with a second passage in that language so the match is on content.
    passages = [
        "数据库连接池的最大连接数设置为五十",
        "团队会议改到了星期四下午",
        "東京オフィスのネットワークは毎週月曜日にメンテナンスされます",
        "新しい社員は入社初日にノートパソコンを受け取ります",
    ]
    vectors = embedder.embed_passages(passages)
    assert _ranking(embedder, "数据库最多可以有多少个连接？", vectors)[0] == 0
    assert _ranking(embedder, "ネットワークのメンテナンスはいつですか", vectors)[0] == 2
    # Across languages: Chinese / Japanese questions about English memories.
    assert _ranking(embedder, "如何对用户密码进行哈希？", memory_vectors)[0] == BCRYPT
    assert _ranking(embedder, "ビルドサーバーへのデプロイ方法", memory_vectors)[0] == DEPLOY


def test_get_embedder_reuses_the_loaded_pack(pack_dir: Path) -> None:
    first = get_embedder(pack_dir)
    assert get_embedder(pack_dir) is first


# --------------------------------------------------------------------------- embedding cache


class CountingEmbedder:
    """Wraps the real embedder and records every text it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.pack_key = inner.pack_key
        self.embedded: list[str] = []

    def embed_passages(
        self, texts: Sequence[str], batch_size: int = 16, progress: object = None
    ) -> np.ndarray:
        self.embedded.extend(texts)
        return self.inner.embed_passages(texts, batch_size, progress)  # type: ignore[arg-type]


def test_cache_round_trip_and_isolation_by_pack_key(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = {f"h{i}": rng.normal(size=384).astype(np.float32) for i in range(3)}
    with EmbeddingCache(tmp_path / "emb.sqlite") as cache:
        cache.put_many("pack-a", vectors)
        got = cache.get_many("pack-a", ["h0", "h1", "h2", "missing"])
        assert sorted(got) == ["h0", "h1", "h2"]
        for key, vector in vectors.items():
            np.testing.assert_array_equal(got[key], vector)
            assert got[key].dtype == np.float32
        assert cache.get_many("pack-b", ["h0"]) == {}
        assert cache.count("pack-a") == 3 and cache.count("pack-b") == 0
        cache.put_many("pack-b", {"h0": vectors["h0"]})
        assert cache.pack_keys() == {"pack-a": 3, "pack-b": 1}
        assert cache.drop_other_packs("pack-a") == 1
        assert cache.count("pack-b") == 0
    # A second connection (as another process would open it) sees the committed rows.
    with EmbeddingCache(tmp_path / "emb.sqlite") as other:
        assert other.count("pack-a") == 3


def test_embed_with_cache_never_re_embeds(embedder: Embedder, tmp_path: Path) -> None:
    texts = ["first passage about builds", "second passage about deploys", "third about databases"]
    by_hash = {text_hash(t): t for t in texts}
    counting = CountingEmbedder(embedder)
    with EmbeddingCache(tmp_path / "emb.sqlite") as cache:
        first = embed_with_cache(counting, cache, by_hash)  # type: ignore[arg-type]
        assert sorted(counting.embedded) == sorted(texts)
        assert cache.count(embedder.pack_key) == 3

        counting.embedded.clear()
        progress: list[tuple[int, int]] = []
        second = embed_with_cache(counting, cache, by_hash, lambda d, t: progress.append((d, t)))  # type: ignore[arg-type]
        assert counting.embedded == [] and progress == []
        for digest in by_hash:
            np.testing.assert_allclose(second[digest], first[digest], atol=0)

        # One new text: only it is embedded.
        extra = "a fourth, new passage"
        by_hash[text_hash(extra)] = extra
        third = embed_with_cache(counting, cache, by_hash)  # type: ignore[arg-type]
        assert counting.embedded == [extra]
        assert set(third) == set(by_hash)
        np.testing.assert_allclose(third[text_hash(extra)], embedder.embed_passages([extra])[0], atol=1e-6)


def test_loading_the_model_writes_nothing_outside_hive_brains_own_dirs(tmp_path, pack_dir):
    """onnxruntime's device-id file lands in hive-brain's cache, not ~/.cache/Microsoft."""
    import os
    import subprocess
    import sys

    home = tmp_path / "fresh-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = str(home)
    code = ("from hive_brain.embedding.embedder import Embedder; import sys; "
            "e = Embedder.load(sys.argv[1]); print(len(e.embed_queries(['hello'])[0]))")
    p = subprocess.run([sys.executable, "-c", code, str(pack_dir)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    written = sorted(str(f.relative_to(home)) for f in home.rglob("*") if f.is_file())
    assert not [f for f in written if not f.startswith(".cache/hive-brain/")], written


def test_a_single_threaded_session_for_one_text_gives_the_same_vectors(pack_dir: Path) -> None:
    shared = Embedder.load(pack_dir)
    single = Embedder.load(pack_dir)
    single.enable_single_session()
    assert single._single is not None and shared._single is None
    q = "which node dependency tool should I use?"
    assert np.allclose(single.embed_queries([q]), shared.embed_queries([q]), atol=1e-5)
    v1, t1 = single.embed_query_tokens(q)
    v2, t2 = shared.embed_query_tokens(q)
    assert np.allclose(v1, v2, atol=1e-5) and np.allclose(t1, t2, atol=1e-4)
    texts = ["Use pnpm, never npm.", "The web app is deployed on Fly.io."]  # a batch: the shared session
    assert np.allclose(single.embed_passages(texts), shared.embed_passages(texts), atol=1e-5)


def test_an_idle_embedder_releases_its_batch_session_and_gives_the_same_vectors(pack_dir: Path) -> None:
    """A warm server with nothing to embed drops the batch session (the model's memory once less); a
    few texts then run on the question session, a large batch loads the batch session again."""
    from hive_brain.embedding.embedder import SMALL_BATCH

    emb = Embedder.load(pack_dir)
    assert not emb.release_batch_session()  # no question session: the batch session answers everything
    emb.enable_single_session()
    few = ["Use pnpm, never npm.", "The web app is deployed on Fly.io.", "Rotate the keys every quarter."]
    many = [f"passage {i}: the release is tagged, then announced in #eng" for i in range(SMALL_BATCH + 4)]
    want_few, want_many = emb.embed_passages(few), emb.embed_passages(many)
    assert emb.release_batch_session() and emb._session is None
    assert not emb.release_batch_session()
    assert np.allclose(emb.embed_passages(few), want_few, atol=1e-5)
    assert emb._session is None  # a few texts: the question session, no load
    assert np.allclose(emb.embed_passages(many), want_many, atol=1e-5)
    assert emb._session is not None  # loaded again for the batch


def test_fixed_texts_are_embedded_once_per_pack_and_a_torn_file_is_recomputed(tmp_path: Path) -> None:
    from hive_brain.embedding.fixed import cache_path, cached

    calls = []

    def compute() -> list[np.ndarray]:
        calls.append(1)
        return [np.full(3, float(len(calls)), dtype=np.float32), np.zeros((2, 3), dtype=np.float16)]

    texts = ["one", "two"]
    first = cached("pack:a", "t", texts, compute)
    again = cached("pack:a", "t", texts, compute)
    assert len(calls) == 1 and all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(first, again, strict=True))
    cached("pack:b", "t", texts, compute)  # another pack's vectors are its own
    cached("pack:a", "t", ["one", "three"], compute)  # and other texts' too
    assert len(calls) == 3
    cache_path("pack:a", "t", texts).write_bytes(b"PK\x03\x04 torn")
    assert cached("pack:a", "t", texts, compute)[0][0] == 4.0 and len(calls) == 4
    assert len(cached("pack:a", "t", texts, compute)) == 2 and len(calls) == 4  # rewritten whole
    assert cached(None, "t", texts, compute) and len(calls) == 5  # a stand-in embedder: never kept


def test_the_background_read_back_from_disk_is_the_one_computed(pack_dir: Path) -> None:
    """A server start embedded the abstention's background sentences every time (2.6 CPU-s of ~10 to
    ``ready``, issue 26); a second process reads them back, and they are the vectors it would compute."""
    from hive_brain.embedding.fixed import cache_path
    from hive_brain.search import candidates

    emb = Embedder.load(pack_dir)
    candidates._background_cache.clear()
    candidates._background_tokens.clear()
    fresh, fresh_tok = candidates.background_vectors(emb), candidates.background_tokens(emb)
    assert cache_path(emb.pack_key, "background", candidates.BACKGROUND).exists()
    candidates._background_cache.clear()
    candidates._background_tokens.clear()
    calls = []
    real = emb.embed_passages
    emb.embed_passages = lambda *a, **k: calls.append(1) or real(*a, **k)  # type: ignore[method-assign]
    back, back_tok = candidates.background_vectors(emb), candidates.background_tokens(emb)
    assert not calls and back.shape == fresh.shape and np.allclose(back, fresh)
    assert len(back_tok) == len(fresh_tok) and all(np.array_equal(a, b) for a, b in zip(back_tok, fresh_tok, strict=True))
