"""LanceDB passage vectors: prefiltered search, isolation, upsert/delete, one table per pack key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hive_brain.embedding.embedder import Embedder
from hive_brain.index.predicates import And, Eq, In, Not, Or, Range, matches
from hive_brain.index.vectors import AUTO_WARM_AFTER, FIELDS, VectorIndex, table_name

DIM = 384


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _row(passage_id: str, vector: np.ndarray, **fields: Any) -> dict[str, Any]:
    note_path = passage_id.split("#")[0]
    return {"passage_id": passage_id, "note_path": note_path, "vector": vector, **fields}


def _visible_to(agent: str) -> Or:
    return Or((Eq("layer", "shared"), And((Eq("layer", "private"), Eq("agent", agent)))))


@pytest.fixture(scope="module")
def embedder(pack_dir: Path) -> Embedder:
    return Embedder.load(pack_dir)


def test_missing_table_is_empty(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "vec", "pack:0", DIM)
    assert index.search(np.ones(DIM), None) == []
    assert index.search(np.ones(DIM), Eq("agent", "a")) == []
    assert index.count() == 0 and index.passage_ids() == set() and index.rows_for(["x.md"]) == []
    index.delete_notes(["x.md"])
    index.delete_all()
    assert not (tmp_path / "vec" / f"{table_name('pack:0')}.lance").exists()


def test_isolation_with_identical_text(embedder: Embedder, tmp_path: Path) -> None:
    text = "The deploy key for the payments service lives in the team vault"
    (vector,) = embedder.embed_passages([text])
    distractors = embedder.embed_passages(["Lunch is at noon", "Gradle caches builds", "Use pnpm for node"])
    index = VectorIndex(tmp_path / "vec", embedder.pack_key, embedder.dim)
    index.upsert(
        [
            _row("Shared/deploy.md#0", vector, layer="shared"),
            _row("Agents/a/deploy.md#0", vector, layer="private", agent="a"),
            _row("Agents/b/deploy.md#0", vector, layer="private", agent="b"),
            *(
                _row(f"Agents/b/other{i}.md#0", v, layer="private", agent="b")
                for i, v in enumerate(distractors)
            ),
        ]
    )
    (query,) = embedder.embed_queries(["where is the payments deploy key kept?"])
    for limit in (1, 2, 3, 50):
        hits = index.search(query, _visible_to("a"), limit=limit)
        paths = [h.note_path for h in hits]
        assert all(not p.startswith("Agents/b/") for p in paths)
        assert len(hits) == min(limit, 2)
    hits = index.search(query, _visible_to("a"), limit=50)
    assert {h.note_path for h in hits} == {"Shared/deploy.md", "Agents/a/deploy.md"}
    assert all(0.8 < h.similarity <= 1.0 for h in hits)  # e5 cosine values are compressed high
    hits_b = index.search(query, _visible_to("b"), limit=50)
    assert "Agents/a/deploy.md" not in {h.note_path for h in hits_b}
    assert hits_b[0].note_path in {"Shared/deploy.md", "Agents/b/deploy.md"}
    # Unfiltered, b's identical copy is there too: the filter, not the ranking, keeps it out.
    assert len(index.search(query, None, limit=50)) == 6


def _needle_index(tmp_path: Path) -> tuple[VectorIndex, np.ndarray]:
    """2,000 rows of agent "other" around the query, and 3 rows of agent "small" far from it."""
    rng = np.random.default_rng(7)
    query = _unit(rng, 1)[0]
    others = _unit(rng, 2000) * 0.3 + query  # all close to the query
    others /= np.linalg.norm(others, axis=1, keepdims=True)
    small = _unit(rng, 3) * 0.3 - query  # all on the far side
    small /= np.linalg.norm(small, axis=1, keepdims=True)
    index = VectorIndex(tmp_path / "vec", "pack:needle", DIM)
    rows = [_row(f"Agents/other/n{i}.md#0", v, agent="other", layer="private") for i, v in enumerate(others)]
    rows += [_row(f"Agents/small/n{i}.md#0", v, agent="small", layer="private") for i, v in enumerate(small)]
    index.upsert(rows)
    return index, query


def test_prefilter_finds_the_needle_before_the_top_k_cut(tmp_path: Path) -> None:
    index, query = _needle_index(tmp_path)
    assert index.count() == 2003
    # Without the filter the small agent's rows are nowhere near the top 3 ...
    assert all(h.note_path.startswith("Agents/other/") for h in index.search(query, None, limit=50))
    # ... with it, all three come back even though limit == 3.
    hits = index.search(query, Eq("agent", "small"), limit=3)
    assert sorted(h.passage_id for h in hits) == [f"Agents/small/n{i}.md#0" for i in range(3)]
    assert all(h.similarity < 0 for h in hits)
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)


def test_prefilter_still_holds_with_an_ann_index(tmp_path: Path) -> None:
    index, query = _needle_index(tmp_path)
    index.optimize(index_threshold=1000)
    assert index._has_vector_index(index._table(create=False))
    hits = index.search(query, Eq("agent", "small"), limit=3)
    assert sorted(h.passage_id for h in hits) == [f"Agents/small/n{i}.md#0" for i in range(3)]


def test_predicates_compile_into_the_prefilter(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    vectors = _unit(rng, 12)
    rows = [
        _row(
            f"n{i}.md#0",
            vectors[i],
            agent="ab"[i % 2],
            kind=("memory", "note", "core")[i % 3],
            date=1000 + i,
            task="t'1" if i == 5 else "",
        )
        for i in range(12)
    ]
    index = VectorIndex(tmp_path / "vec", "pack:preds", DIM)
    index.upsert(rows)
    predicates = [
        Eq("agent", "a"),
        In("kind", ("memory", "core")),
        In("kind", ()),
        Range("date", lo=1003, hi=1006),
        Range("date", lo=1010),
        Not(Eq("kind", "note")),
        And((Eq("agent", "b"), Range("date", hi=1005))),
        Eq("task", "t'1"),  # quoting survives
    ]
    for predicate in predicates:
        expected = {r["passage_id"] for r in rows if matches(predicate, r)}
        got = {h.passage_id for h in index.search(rng.normal(size=DIM), predicate, limit=50)}
        assert got == expected, predicate
        assert index.count(predicate) == len(expected)


def test_upsert_replaces_and_deletes(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    vectors = _unit(rng, 6)
    index = VectorIndex(tmp_path / "vec", "pack:crud", DIM)
    index.upsert([_row(f"a.md#{i}", vectors[i], text_hash=f"h{i}", date=1) for i in range(3)])
    index.upsert([_row(f"b.md#{i}", vectors[3 + i], text_hash=f"g{i}") for i in range(2)])
    assert index.count() == 5
    # Replace a.md#1 (new vector and hash); duplicates inside one batch: the last one wins.
    index.upsert([_row("a.md#1", vectors[5], text_hash="old"), _row("a.md#1", vectors[5], text_hash="new")])
    assert index.count() == 5
    assert index.passage_hashes()["a.md#1"] == "new"
    top = index.search(vectors[5], None, limit=1)[0]
    assert top.passage_id == "a.md#1" and top.similarity == pytest.approx(1.0, abs=1e-5)
    rows = index.rows_for(["a.md"])
    assert sorted(r["passage_id"] for r in rows) == ["a.md#0", "a.md#1", "a.md#2"]
    assert set(rows[0]) == set(FIELDS) and rows[0]["layer"] == "" and rows[0]["date"] == 1
    assert len(index.rows_for(["a.md"], with_vectors=True)[0]["vector"]) == DIM

    index.delete_notes(["a.md", "not-there.md"])
    assert index.passage_ids() == {"b.md#0", "b.md#1"}
    index.delete_passages(["b.md#0"])
    assert index.passage_ids() == {"b.md#1"}
    index.delete_all()
    assert index.count() == 0 and index.search(vectors[0], None) == []
    index.upsert([_row("c.md#0", vectors[0])])  # still usable after delete_all
    assert index.passage_ids() == {"c.md#0"}


def test_one_table_per_pack_key(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    first = VectorIndex(tmp_path / "vec", "pack:one", DIM)
    second = VectorIndex(tmp_path / "vec", "pack:two", 8)
    first.upsert([_row("x.md#0", _unit(rng, 1)[0])])
    second.upsert([_row("y.md#0", _unit(rng, 1, 8)[0])])
    assert first.passage_ids() == {"x.md#0"} and second.passage_ids() == {"y.md#0"}
    assert first.name != second.name
    with pytest.raises(ValueError):
        first.search(np.ones(8), None)
    with pytest.raises(ValueError):
        first.upsert([_row("z.md#0", np.ones(8))])
    assert second.drop_other_tables() == [first.name]
    reopened = VectorIndex(tmp_path / "vec", "pack:one", DIM)
    assert reopened.count() == 0


def test_another_handle_sees_writes(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    reader = VectorIndex(tmp_path / "vec", "pack:shared", DIM)
    writer = VectorIndex(tmp_path / "vec", "pack:shared", DIM)
    writer.upsert([_row("a.md#0", _unit(rng, 1)[0])])
    assert reader.count() == 1  # the reader opens the table after it exists
    writer.upsert([_row("b.md#0", _unit(rng, 1)[0])])
    assert reader.count() == 2 and len(reader.search(rng.normal(size=DIM), None)) == 2


def test_warm_memory_copy_matches_lancedb(tmp_path: Path) -> None:
    """The server's in-memory copy returns what the LanceDB prefilter returns, and follows writes."""
    rng = np.random.default_rng(11)
    index = VectorIndex(tmp_path / "v", "pack:mem", DIM)
    vectors = _unit(rng, 300)
    index.upsert([
        _row(f"n{i}.md#0", vectors[i], note_path=f"n{i}.md", layer="shared" if i % 3 else "private",
             agent="" if i % 3 else ("a" if i % 2 else "b"), kind="memory", date=1000 + i)
        for i in range(300)
    ])
    index.enable_memory_cache(max_rows=0)  # the reference stays on LanceDB (a copy is never kept)
    warm = VectorIndex(tmp_path / "v", "pack:mem", DIM)
    warm.enable_memory_cache()
    predicates = [None, _visible_to("a"), And((_visible_to("b"), Range("date", lo=1100, hi=1200))),
                  Not(Eq("layer", "shared")), In("note_path", ("n1.md", "n5.md", "n299.md"))]
    for predicate in predicates:
        q = _unit(rng, 1)[0]
        cold = [(h.passage_id, round(h.similarity, 4)) for h in index.search(q, predicate, limit=20)]
        hot = [(h.passage_id, round(h.similarity, 4)) for h in warm.search(q, predicate, limit=20)]
        assert hot == cold, predicate
    assert warm._mem is not None  # it really searched the in-memory copy
    # A write through another handle shows up within the version check interval.
    index.upsert([_row("new.md#0", vectors[0], note_path="new.md", layer="shared", kind="memory")])
    warm._mem_checked = 0.0  # skip the 1 s wait instead of sleeping in a test
    assert "new.md#0" in {h.passage_id for h in warm.search(vectors[0], None, limit=3)}


def test_a_reused_handle_warms_itself_and_sees_other_writers_at_once(tmp_path: Path) -> None:
    """A long-lived process (MCP, a library user) gets the warm copy after a few searches; a one-shot
    recall never loads it. Without a server's 1 s grace, another process's write shows up at once."""
    rng = np.random.default_rng(12)
    vectors = _unit(rng, 50)
    writer = VectorIndex(tmp_path / "v", "pack:auto", DIM)
    writer.upsert([_row(f"n{i}.md#0", vectors[i], note_path=f"n{i}.md") for i in range(50)])
    reader = VectorIndex(tmp_path / "v", "pack:auto", DIM)
    first = [h.passage_id for h in reader.search(vectors[7], None, limit=5)]
    assert reader._mem is None  # one search: no copy
    for _ in range(AUTO_WARM_AFTER - 1):
        again = [h.passage_id for h in reader.search(vectors[7], None, limit=5)]
    assert reader._mem is not None and again == first
    writer.upsert([_row("new.md#0", vectors[7], note_path="new.md")])
    assert "new.md#0" in {h.passage_id for h in reader.search(vectors[7], None, limit=3)}


def test_lancedb_is_imported_without_the_rest_clients_api_modules(tmp_path):
    """A fresh process: ``import_lancedb`` leaves out the REST namespace client's API modules (half of
    ``import lancedb``'s time, never used by a local table); a table is written and searched as
    before, and the client's names still import on first use."""
    import subprocess
    import sys

    code = f"""
import sys
import numpy as np
from hive_brain.index.vectors import REST_CLIENT, VectorIndex, import_lancedb
import_lancedb()
assert "lancedb" in sys.modules
api = [m for m in sys.modules if m.startswith(REST_CLIENT + ".api.")]
assert not api, api
vi = VectorIndex({str(tmp_path)!r}, pack_key="k", dim=4)
v = np.eye(4, dtype=np.float32)
vi.upsert([{{"passage_id": f"n{{i}}.md#0", "note_path": f"n{{i}}.md", "vector": v[i]}} for i in range(4)])
assert [h.passage_id for h in vi.search(v[2], limit=1)] == ["n2.md#0"]
from lance_namespace_urllib3_client import ApiClient, TableApi  # the package's __init__ runs now
print("ok", ApiClient.__name__, TableApi.__name__)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]
