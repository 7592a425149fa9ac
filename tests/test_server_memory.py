"""What keeps a long-running server's memory bounded (issue 26): bounded caches, the C heap's
arenas and trimming, and the options the server's ONNX sessions are built with. Nothing is timed
here; benchmarks/server_rss.py measures the RSS."""

from __future__ import annotations

import numpy as np

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
