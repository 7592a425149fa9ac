from __future__ import annotations

import json

import pytest

from hive_brain.errors import IndexError_, LockTimeout
from hive_brain.index.lexical import PLAIN_BOOSTS, LexicalIndex
from hive_brain.index.predicates import And, Eq, In, Not, Or, Range, all_of, any_of

DOCS = [
    ("Tools/postgres.md", "Postgres setup", "We are installing Postgres 16 on the build server.", ["database"], "shared", ""),
    ("Tools/redis.md", "Redis cache", "Redis is used as a cache for sessions.", ["cache"], "shared", ""),
    ("Ideas/cafe.md", "Café ideas", "Meet at the café near the Ångström lab on Fridays.", ["social"], "shared", ""),
    ("Ideas/zh.md", "机器学习笔记", "自然语言处理是人工智能的一个重要方向，我们讨论了分词。", ["ml"], "shared", ""),
    ("Ideas/ja.md", "旅行", "東京タワーに行きました。とても楽しかったです。", ["travel"], "shared", ""),
    ("Projects/deploy.md", "Deploy checklist", "Run migrations before deploying the API.", ["ops"], "shared", ""),
    ("Projects/lint.md", "Linting", "We run ruff with line length 110.", ["python"], "shared", ""),
    ("Skills/git.md", "Git tricks", "Use git bisect to find the commit that broke the build.", ["git"], "shared", ""),
    ("Ideas/garden.md", "Garden", "Tomatoes need sun and water every day.", ["home"], "shared", ""),
    ("Ideas/music.md", "Music", "Practice scales on the piano for twenty minutes.", ["hobby"], "shared", ""),
    ("Agents/a/Memory/pref.md", "Editor preference", "The user prefers vim keybindings.", ["pref"], "private", "a"),
    ("Agents/b/Memory/pref.md", "Editor preference", "The user prefers emacs keybindings.", ["pref"], "private", "b"),
]


def _doc(path, title, text, tags, layer, agent, n=0, **extra):
    return {"passage_id": f"{path}#{n}", "note_path": path, "title": title, "text": text, "tags": tags,
            "layer": layer, "agent": agent, "kind": "note", "date": 1_700_000_000, **extra}


@pytest.fixture
def index(tmp_path):
    ix = LexicalIndex(tmp_path / "lex")
    with ix.writer() as w:
        for i, d in enumerate(DOCS):
            w.add(_doc(*d, date=1_700_000_000 + i * 86_400))
        for i in range(8):
            w.add(_doc(f"Filler/f{i}.md", f"Filler {i}", f"Nothing to see in filler number {i}.", [], "shared", ""))
    return ix


def _paths(hits):
    return [h.note_path for h in hits]


def test_finds_by_title_text_tag(index):
    assert index.doc_count() == 20
    assert _paths(index.search("redis"))[0] == "Tools/redis.md"
    assert _paths(index.search("install postgres"))[0] == "Tools/postgres.md"
    assert _paths(index.search("git bisect"))[0] == "Skills/git.md"
    assert _paths(index.search("database"))[0] == "Tools/postgres.md"  # tag only
    assert _paths(index.search("checklist"))[0] == "Projects/deploy.md"  # title only
    hit = index.search("redis", limit=1)[0]
    assert hit.passage_id == "Tools/redis.md#0" and hit.score > 0


def test_title_boost_beats_body_mention(tmp_path):
    ix = LexicalIndex(tmp_path / "lex")
    with ix.writer() as w:
        w.add(_doc("a.md", "Kubernetes", "notes about clusters", [], "shared", ""))
        w.add(_doc("b.md", "Misc", "kubernetes notes about clusters", [], "shared", ""))
    assert _paths(ix.search("kubernetes")) == ["a.md", "b.md"]
    assert _paths(ix.search("kubernetes", fields_boost=PLAIN_BOOSTS)) == ["b.md"]
    assert _paths(ix.search_plain("kubernetes")) == ["b.md"]


def test_accentless_query_and_accented_query(index):
    assert _paths(index.search("cafe"))[0] == "Ideas/cafe.md"
    assert _paths(index.search("angstrom"))[0] == "Ideas/cafe.md"
    assert _paths(index.search("CAFÉ"))[0] == "Ideas/cafe.md"


def test_chinese_and_japanese_queries(index):
    assert _paths(index.search("自然语言"))[0] == "Ideas/zh.md"
    assert _paths(index.search("分词"))[0] == "Ideas/zh.md"
    assert _paths(index.search("机器学习"))[0] == "Ideas/zh.md"  # title
    assert _paths(index.search("東京タワー"))[0] == "Ideas/ja.md"


def test_long_unspaced_chinese_run_searchable_from_middle(tmp_path):
    run = "".join(chr(0x4E00 + (i * 37) % 5000) for i in range(500))
    ix = LexicalIndex(tmp_path / "lex")
    with ix.writer() as w:
        w.add(_doc("long.md", "长", run, [], "shared", ""))
        w.add(_doc("other.md", "其他", "完全不同的内容", [], "shared", ""))
    assert _paths(ix.search(run[240:246])) == ["long.md"]


NASTY = ["", "   ", "*", "~~~", "the and of", "foo AND (bar", "title:x", '"unbalanced', "😀", "SELECT * FROM t; --",
         "a\ud800b", "NOT +redis -postgres^2", "[[link]] {json: 1}", "x" * 5000, "词" * 3000]


def test_nasty_queries_never_raise(index):
    for q in NASTY:
        assert isinstance(index.search(q), list), q
    assert _paths(index.search("redis) AND (title:"))[0] == "Tools/redis.md"


def test_no_terms_returns_empty(index):
    assert index.search("") == []
    assert index.search("the of and") == []


def test_predicate_isolation_identical_text(tmp_path):
    ix = LexicalIndex(tmp_path / "lex")
    text = "the deployment password rotation procedure"
    with ix.writer() as w:
        w.add(_doc("Memory/shared.md", "Rotation", text, [], "shared", ""))
        w.add(_doc("Agents/a/Memory/r.md", "Rotation", text, [], "private", "a"))
        w.add(_doc("Agents/b/Memory/r.md", "Rotation", text, [], "private", "b"))
    for_a = any_of(Eq("layer", "shared"), all_of(Eq("layer", "private"), Eq("agent", "a")))
    hits = ix.search("password rotation", where=for_a)
    assert sorted(_paths(hits)) == ["Agents/a/Memory/r.md", "Memory/shared.md"]
    # the boundary does not change scores: identical passages score identically
    assert hits[0].score == pytest.approx(hits[1].score)
    assert _paths(ix.search("password", where=Eq("agent", "b"))) == ["Agents/b/Memory/r.md"]
    assert _paths(ix.search("password", where=Eq("agent", ""))) == ["Memory/shared.md"]
    assert sorted(_paths(ix.search("password", where=Not(Eq("agent", "b"))))) == [
        "Agents/a/Memory/r.md", "Memory/shared.md"]
    assert _paths(ix.search("password", where=In("agent", ()))) == []
    assert len(ix.search("password", where=In("agent", ("a", "b")))) == 2
    assert _paths(ix.search("password", where=And((Eq("layer", "private"), Not(Eq("agent", "a")))))) == [
        "Agents/b/Memory/r.md"]
    assert len(ix.search("password", where=Or((Eq("agent", "zzz"),)))) == 0
    assert ix.count(for_a) == 2 and ix.count() == 3


def test_needle_filter_applies_before_top_k(tmp_path):
    ix = LexicalIndex(tmp_path / "lex")
    text = "release checklist for the payment service rollout"
    with ix.writer() as w:
        for i in range(3000):
            # the haystack scores higher: its title repeats the query words
            w.add(_doc(f"Other/n{i}.md", "release checklist payment", text, ["release"], "private", "other"))
        for i in range(3):
            w.add(_doc(f"Small/n{i}.md", "notes", text, [], "private", "small"))
    assert all(h.note_path.startswith("Other/") for h in ix.search("release checklist payment", limit=3))
    hits = ix.search("release checklist payment", where=Eq("agent", "small"), limit=3)
    assert sorted(_paths(hits)) == [f"Small/n{i}.md" for i in range(3)]


def test_date_range(index):
    base = 1_700_000_000
    hits = index.search("keybindings", where=Range("date", base + 10 * 86_400, None))
    assert sorted(_paths(hits)) == ["Agents/a/Memory/pref.md", "Agents/b/Memory/pref.md"]
    assert _paths(index.search("keybindings", where=Range("date", None, base + 10 * 86_400))) == [
        "Agents/a/Memory/pref.md"]
    with pytest.raises(ValueError):
        index.search("x", where=Range("agent", 1, 2))
    with pytest.raises(ValueError):
        index.search("x", where=Eq("text", "x"))


def test_delete_note_and_replace(index):
    with index.writer() as w:
        w.delete_note("Tools/redis.md")
    assert index.search("redis") == []
    assert index.doc_count() == 19
    with index.writer() as w:
        w.delete_note("Tools/postgres.md")
        w.add(_doc("Tools/postgres.md", "Postgres setup", "Now we use MySQL instead.", [], "shared", ""))
    assert index.search("postgres 16 build server")[0].note_path == "Tools/postgres.md"  # title still matches
    assert index.get_texts(["Tools/postgres.md#0"]) == {"Tools/postgres.md#0": "Now we use MySQL instead."}
    assert index.note_passages("Tools/postgres.md") == ["Tools/postgres.md#0"]


def test_rollback_on_exception_leaves_index_unchanged(index):
    before = index.doc_count()
    with pytest.raises(RuntimeError), index.writer() as w:
        w.delete_note("Tools/postgres.md")
        w.add(_doc("new.md", "New", "brand new zebra", [], "shared", ""))
        raise RuntimeError("boom")
    index.reload()
    assert index.doc_count() == before
    assert _paths(index.search("postgres"))[0] == "Tools/postgres.md"
    assert index.search("zebra") == []
    # the lock was released: a new writer can open and commit
    with index.writer() as w:
        w.add(_doc("new.md", "New", "brand new zebra", [], "shared", ""))
    assert _paths(index.search("zebra")) == ["new.md"]


def test_single_writer(index, tmp_path, monkeypatch):
    monkeypatch.setattr("hive_brain.index.lexical.WRITER_BUSY_WAIT_S", 0.2)
    w = index.writer()
    try:
        with pytest.raises(LockTimeout):
            index.writer()
        other = LexicalIndex(tmp_path / "lex")  # a second handle, as another process would have
        with pytest.raises(LockTimeout):
            other.writer()
    finally:
        w.rollback()
    with index.writer():
        pass


def test_deferred_merges_hold_the_writer_until_finished_and_another_handle_waits(index, tmp_path):
    """The server commits with ``defer_merges`` and waits for tantivy's merges only after answering; a
    writer in another handle (another process's) waits for that instead of failing at once."""
    import threading
    import time

    index.defer_merges = True
    with index.writer() as w:
        w.add(_doc("later.md", "Later", "a deferred zebra", [], "shared", ""))
    assert _paths(index.search("zebra")) == ["later.md"]  # committed and visible before the merges end
    other = LexicalIndex(tmp_path / "lex")
    t = threading.Timer(0.5, index.finish_merges)
    t.start()
    t0 = time.monotonic()
    with other.writer() as w2:
        w2.add(_doc("other.md", "Other", "another zebra", [], "shared", ""))
    t.join()
    assert time.monotonic() - t0 >= 0.4  # it waited for the first handle's writer to go
    index.reload()
    assert sorted(_paths(index.search("zebra"))) == ["later.md", "other.md"]


def test_stored_fields_and_fetch(index):
    docs = index.get_docs(["Ideas/cafe.md#0", "missing#0"])
    assert list(docs) == ["Ideas/cafe.md#0"]
    d = docs["Ideas/cafe.md#0"]
    assert d["title"] == "Café ideas" and d["tags"] == ["social"] and d["layer"] == "shared"
    assert d["text"].startswith("Meet at the café")
    hit = index.search("cafe", fetch=True)[0]
    assert hit.doc is not None and hit.doc["note_path"] == "Ideas/cafe.md"


def test_a_notes_passages_come_whole_in_passage_order(tmp_path):
    ix = LexicalIndex(tmp_path / "lex")
    with ix.writer() as w:
        for n in (10, 2, 0, 1):  # passage 10 sorts after 2 by number, not by text
            w.add(_doc("Long/note.md", "Long note", f"Part {n} of the long note.", [], "shared", "", n=n))
        w.add({**_doc("Long/note.md", "Long note", "the whole note", [], "shared", ""), "passage_id": "Long/note.md",
               "unit": "note"})
        w.add(_doc("Other/note.md", "Other", "Another note.", [], "shared", ""))
    pids = ix.note_passages("Long/note.md")
    assert pids == ["Long/note.md#0", "Long/note.md#1", "Long/note.md#2", "Long/note.md#10"]
    docs = ix.note_docs("Long/note.md")
    assert docs == [ix.get_docs(pids)[p] for p in pids]
    assert [d["text"] for d in docs][-1] == "Part 10 of the long note."
    assert ix.note_docs("Missing/note.md") == []


def test_reopen_and_version_mismatch(tmp_path, index):
    again = LexicalIndex(tmp_path / "lex")
    assert again.doc_count() == 20
    meta = tmp_path / "lex" / "hive-lexical.json"
    meta.write_text(json.dumps({"schema_version": -1}))
    with pytest.raises(IndexError_):
        LexicalIndex(tmp_path / "lex")
    fresh = LexicalIndex(tmp_path / "lex", reset_incompatible=True)
    assert fresh.was_reset and fresh.doc_count() == 0


def test_reader_sees_commits_from_another_handle(tmp_path):
    writer_side = LexicalIndex(tmp_path / "lex")
    reader_side = LexicalIndex(tmp_path / "lex")
    assert reader_side.doc_count() == 0
    with writer_side.writer() as w:
        w.add(_doc("x.md", "X", "hello world", [], "shared", ""))
    reader_side.reload()
    assert _paths(reader_side.search("hello")) == ["x.md"]


def test_writer_dropped_without_close_releases_lock_and_discards(tmp_path):
    ix = LexicalIndex(tmp_path / "lex")
    w = ix.writer()
    w.add(_doc("lost.md", "Lost", "never committed", [], "shared", ""))
    del w
    with ix.writer() as w2:
        w2.add(_doc("kept.md", "Kept", "committed", [], "shared", ""))
    assert ix.doc_count() == 1 and _paths(ix.search("committed")) == ["kept.md"]


def test_long_prompt_keeps_informative_terms(index):
    noise = " ".join(f"zz{i}qq" for i in range(300))  # 300 terms that occur nowhere
    assert _paths(index.search(f"{noise} tomatoes {noise}"))[0] == "Ideas/garden.md"


def test_read_only_handle_never_creates_or_writes(tmp_path):
    ro = LexicalIndex(tmp_path / "lex", read_only=True)
    assert not ro.exists and ro.search("anything") == [] and ro.doc_count() == 0
    assert not (tmp_path / "lex").exists()
    with pytest.raises(IndexError_):
        ro.writer()
    rw = LexicalIndex(tmp_path / "lex")
    with rw.writer() as w:
        w.add(_doc("x.md", "X", "hello world", [], "shared", ""))
    ro2 = LexicalIndex(tmp_path / "lex", read_only=True)
    assert ro2.exists and _paths(ro2.search("hello")) == ["x.md"]
    (tmp_path / "lex" / "hive-lexical.json").write_text("{}")
    with pytest.raises(IndexError_):
        LexicalIndex(tmp_path / "lex", read_only=True, reset_incompatible=True)


def test_equal_scores_come_in_the_same_order_whatever_order_the_notes_were_indexed(tmp_path):
    """Two devices index the same notes in different orders (one wrote them one by one, the other got
    them in one sync): passages with equal BM25 must still rank alike on both, not in insertion order."""
    docs = [_doc(f"Runbook/step-{i}.md", f"Runbook step {i}", f"Step zqstep{i} of the runbook restarts worker {i}.",
                 [], "shared", "") for i in range(6)]
    orders = []
    for name, seq in (("one", docs), ("two", docs[::-1])):
        ix = LexicalIndex(tmp_path / name)
        for d in seq:
            with ix.writer() as w:
                w.add(d)
        hits = ix.search("how do we restart the runbook worker")
        assert len({round(h.score, 6) for h in hits}) == 1  # a tie, which the order must break alike
        orders.append([h.passage_id for h in hits])
    assert orders[0] == orders[1]
