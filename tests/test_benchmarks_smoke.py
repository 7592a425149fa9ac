"""Smoke tests for benchmarks/: metric arithmetic on tiny synthetic input, the baselines end to end on a
3-note vault, the hive-brain hit mapping on a fake engine, and `benchmarks.startup` with N=2.
No timing assertions. The LoCoMo data part is skipped when ../shared/bench-data is missing.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import common, locomo, startup, tune_locomo  # noqa: E402
from benchmarks.metrics import aggregate, session_scores, text_has_dialog_id, turn_scores  # noqa: E402
from benchmarks.systems import (  # noqa: E402
    BM25Retriever,
    Doc,
    GrepRetriever,
    HiveBrainRetriever,
    query_terms,
    run_system,
    strip_query_syntax,
)

NOTES = {
    "Memory/Conversations/t/t-s01.md": "# s1\n\n**Ann** (D1:1): I adopted a puppy, his name is Max.\n\n"
                                       "**Bob** (D1:2): Congratulations on the new dog!\n",
    "Memory/Conversations/t/t-s02.md": "# s2\n\n**Ann** (D2:1): We went hiking in the Alps in July.\n\n"
                                       "**Bob** (D2:2): The mountains must have been beautiful.\n",
    "Memory/Conversations/t/t-s03.md": "# s3\n\n**Bob** (D3:1): My sister paints watercolor sunsets.\n\n"
                                       "**Ann** (D3:2): Sunsets are lovely to paint.\n",
}
S1, S2, S3 = NOTES
QUESTIONS = [
    {"id": "q1", "question": "What is the name of Ann's puppy?", "category": "single-hop",
     "gold_docs": [S1], "evidence": {"D1:1": S1}},
    {"id": "q2", "question": "Where did Ann go hiking, and who paints sunsets?", "category": "multi-hop",
     "gold_docs": [S2, S3], "evidence": {"D2:1": S2, "D3:1": S3}},
]


@pytest.fixture
def tiny_docs(tmp_path: Path) -> list[Doc]:
    docs = []
    for rel, text in NOTES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        docs.append(Doc(doc_id=rel, path=p))
    return docs


# --------------------------------------------------------------------------- metric arithmetic


def test_session_scores_any_all_mrr():
    s = session_scores(["x", "g1", "x", "y", "g2", "z"], ["g1", "g2"], ks=(1, 2, 5))
    assert s["any@1"] == 0.0 and s["all@1"] == 0.0
    assert s["any@2"] == 1.0 and s["all@2"] == 0.0
    assert s["all@5"] == 1.0  # duplicates collapse: x, g1, y, g2, z
    assert s["mrr"] == pytest.approx(0.5)
    assert session_scores(["a", "b", "c"], ["c"])["mrr"] == pytest.approx(1 / 3)
    assert session_scores(["a"], ["c"])["mrr"] == 0.0
    with pytest.raises(ValueError):
        session_scores(["a"], [])


def test_turn_scores_and_dialog_id_boundaries():
    assert text_has_dialog_id("**A** (D3:4): hi", "D3:4")
    assert not text_has_dialog_id("**A** (D3:40): hi", "D3:4")
    assert not text_has_dialog_id("**A** (D13:4): hi", "D3:4")
    results = [("n9", ["(D9:9) nothing"]), ("n1", ["(D1:1) first", "(D2:2) second"]), ("n0", []),
               ("other-conv", ["(D3:1) same id, wrong conversation"]), ("n0", []), ("n3", ["(D3:1) late"])]
    gold = {"D1:1": "n1", "D3:1": "n3"}
    t = turn_scores(results, gold, ks=(1, 5, 10))
    assert t == {"turn_any@1": 0.0, "turn_all@1": 0.0, "turn_any@5": 1.0, "turn_all@5": 0.0,
                 "turn_any@10": 1.0, "turn_all@10": 1.0}
    assert turn_scores(results[:5], {"D3:1": "n3"}, ks=(10,))["turn_any@10"] == 0.0


def test_aggregate_pooled_and_by_group():
    recs = [{"c": "a", "m": 1.0, "t": None}, {"c": "a", "m": 0.0, "t": None}, {"c": "b", "m": 1.0, "t": 1.0}]
    agg = aggregate(recs, ["m", "t"], "c")
    assert agg["pooled"]["n"] == 3 and agg["pooled"]["m"] == pytest.approx(2 / 3, abs=1e-4)
    assert agg["pooled"]["t"] == 1.0
    assert agg["a"]["m"] == 0.5 and agg["a"]["t"] is None
    assert agg["b"]["m"] == 1.0


def test_timing_helpers():
    assert common.median([4, 1, 3, 2]) == 2.5
    assert common.p95([float(i) for i in range(1, 21)]) == pytest.approx(19.05)
    assert math.isnan(common.median([]))
    s = common.latency_summary([0.001, 0.002, 0.003])
    assert s["n"] == 3 and s["median_ms"] == pytest.approx(2.0)


def test_query_terms_and_syntax_stripping():
    assert query_terms("What is the name of Ann's puppy?") == ["name", "ann", "puppy"]
    assert query_terms("生命数耗完") == ["生命", "命数", "数耗", "耗完"]
    assert strip_query_syntax('title:"foo" AND (bar OR -baz)^2') == "title foo and bar or baz 2"


def test_temp_state_dir_restores_env():
    before = os.environ.get("HIVE_BRAIN_STATE_DIR")
    with common.temp_state_dir() as d:
        assert os.environ["HIVE_BRAIN_STATE_DIR"] == str(d) and d.is_dir()
    assert os.environ.get("HIVE_BRAIN_STATE_DIR") == before
    assert not d.exists()


# --------------------------------------------------------------------------- baselines end to end


def test_grep_baseline_on_tiny_vault(tiny_docs):
    res = run_system(GrepRetriever(), tiny_docs, QUESTIONS, locomo.make_scorer("note"), k=10, warmup=0)
    assert res["status"] == "ok"
    q1, q2 = res["records"]
    # q1 terms: name, ann, puppy -> s01 has all three; the others only "ann".
    assert q1["top"][0] == "t-s01" and q1["any@1"] == 1.0 and q1["mrr"] == 1.0
    # q2 terms: ann, hiking, paints, sunsets -> s03 (ann, paints, sunsets) 3, s02 (ann, hiking) 2, s01 1.
    assert q2["top"] == ["t-s03", "t-s02", "t-s01"]
    assert q2["any@1"] == 1.0 and q2["all@1"] == 0.0 and q2["all@5"] == 1.0 and q2["mrr"] == 1.0
    assert "turn_any@5" not in q1  # whole-note passages: turn level is not meaningful
    agg = aggregate(res["records"], ["all@1", "all@5"])
    assert agg["pooled"]["all@1"] == 0.5 and agg["pooled"]["all@5"] == 1.0


def test_bm25_baselines_on_tiny_vault(tiny_docs):
    res = run_system(BM25Retriever("bm25"), tiny_docs, QUESTIONS, locomo.make_scorer("note"), warmup=0)
    assert res["status"] == "ok"
    assert res["records"][0]["top"][0] == "t-s01"
    turns = BM25Retriever("bm25-turns", units=locomo.split_turns)
    res = run_system(turns, tiny_docs, QUESTIONS, locomo.make_scorer(turns.granularity), warmup=0)
    q1 = res["records"][0]
    assert q1["turn_any@5"] == 1.0 and q1["turn1_any@5"] == 1.0
    assert q1["dialog_ids_per_passage"] == 1.0 and q1["dialog_ids_per_hit"] == 1.0
    assert res["index"]["notes"] == 3 and res["latency"]["n"] == 2


class _FakeEngine:
    def recall(self, query: str, limit: int = 10, scope: str = "full-vault", **_opts: object) -> dict:
        return {"abstained": False, "hits": [
            {"path": S2, "score": 2.0,
             "passage": {"text": "**Ann** (D2:1): hiking", "passageId": f"{S2}#0"}},
            {"path": S3, "score": 1.0, "passage": {"text": "**Ann** (D3:2): lovely"},
             "passages": [{"text": "**Bob** (D3:1): paints"}]},
        ]}


def test_hive_brain_hit_mapping_with_fake_engine(tmp_path):
    r = HiveBrainRetriever(tmp_path)
    r._eng = _FakeEngine()
    hits = r.search("q", 10)
    assert [h.doc_id for h in hits] == [S2, S3]
    assert hits[1].passages == ["**Ann** (D3:2): lovely", "**Bob** (D3:1): paints"]
    rec = locomo.make_scorer("passage")(QUESTIONS[1], hits)
    assert rec["all@5"] == 1.0 and rec["turn_all@5"] == 1.0 and rec["mrr"] == 1.0
    assert rec["turn1_any@5"] == 1.0 and rec["turn1_all@5"] == 0.0  # D3:1 is only in S3's second passage
    assert rec["dialog_ids_per_hit"] == 1.5


def test_unavailable_system_is_reported_not_raised(tiny_docs):
    class Broken(GrepRetriever):
        name = "broken"

        def open(self) -> None:
            from benchmarks.systems import SystemUnavailable

            raise SystemUnavailable("not built yet")

    res = run_system(Broken(), tiny_docs, QUESTIONS, locomo.make_scorer("note"))
    assert res["status"] == "unavailable" and res["reason"] == "not built yet"


# --------------------------------------------------------------------------- startup, data


def test_startup_runs_with_two_runs(tmp_path):
    cfg = common.BenchConfig(mode="quick", bench_data=tmp_path, results_dir=tmp_path)
    res = startup.run(cfg, runs=2)
    base = res["commands"][startup.BASELINE]
    assert base["status"] == "ok" and base["n"] == 2
    for r in res["commands"].values():
        assert r["status"] in ("ok", "unavailable")
        if r["status"] == "ok":
            assert r["n"] == 2 and r["median_ms"] > 0
    assert res["cli_import_modules"]["status"] in ("ok", "unavailable")
    assert startup.summary_rows(res)


def test_locomo_conversion_and_questions(tmp_path):
    data = common.bench_data_path() / "locomo"
    if not (data / "locomo10.json").is_file():
        pytest.skip(f"no LoCoMo data at {data}")
    locomo.convert(data, tmp_path / "converted")
    vault = tmp_path / "vault"
    note_paths = locomo.place_notes(tmp_path / "converted", vault)
    assert len(note_paths) == 272
    questions, info = locomo.load_questions(data, tmp_path / "converted", note_paths, quick=False)
    assert len(questions) == 1536 and info["matches_fresh_conversion"]
    q = next(q for q in questions if len(q["gold_docs"]) == 1)
    assert q["gold_docs"][0].startswith(locomo.NOTES_DIR + "/")
    text = (vault / q["gold_docs"][0]).read_text(encoding="utf-8")
    assert all(text_has_dialog_id(text, d) for d in q["evidence"])  # turn ids visible in the note
    assert set(q["evidence"].values()) == set(q["gold_docs"])


# --------------------------------------------------------------------------- synthetic vaults (scale)


def test_tune_locomo_splits_off_the_conversations_quick_asks():
    qs = [{"id": f"conv-{c}-q{i:03d}"} for c in (26, 30, 41, 42) for i in range(2)]
    quick, tune = tune_locomo.split(qs, "quick"), tune_locomo.split(qs, "tune")
    assert {tune_locomo.conversation_of(q) for q in quick} == {"conv-26", "conv-30"}
    assert {tune_locomo.conversation_of(q) for q in tune} == {"conv-41", "conv-42"}
    assert tune_locomo.split(qs, "all") == qs and len(quick) + len(tune) == len(qs)


def test_fixture_and_scale_metrics_on_a_tiny_vault(tmp_path):
    """fixtures.generate on 50 notes / 10 questions, then the scale benchmark's scoring of BM25 and grep."""
    from benchmarks import fixtures, scale
    from benchmarks.systems import collect_docs

    with common.temp_state_dir():
        fx = fixtures.generate(tmp_path / "vault", 50, queries=10, seed=7)
        again = fixtures.generate(tmp_path / "again", 50, queries=10, seed=7, init=False)
    assert fx["notes"] == 50 and len(fx["questions"]) == 10
    assert [q["question"] for q in fx["questions"]] == [q["question"] for q in again["questions"]]  # seeded
    docs = collect_docs(tmp_path / "vault")
    assert {d.doc_id for d in docs} >= {q["gold_docs"][0] for q in fx["questions"]}
    kinds = {d.doc_id.split("/")[0] for d in docs}
    assert {"Memory", "Projects"} <= kinds
    assert any(d.doc_id.startswith(fixtures.CONVERSATIONS_DIR + "/") for d in docs)
    for q in fx["questions"]:
        gold = (tmp_path / "vault" / q["gold_docs"][0]).read_text(encoding="utf-8")
        assert q["question"] not in gold  # paraphrased, never copied
        assert q["layer"] in ("shared", f"private:{fixtures.QUERY_AGENT}")
    # Frontmatter parses the way hive-brain reads it.
    from hive_brain.store.notes import parse_text

    note = parse_text("x.md", (tmp_path / "vault" / fx["questions"][0]["gold_docs"][0]).read_text(encoding="utf-8"))
    assert note.problem is None and note.meta["id"].startswith("mem-") and note.meta["status"] == "active"
    assert 0.0 < fx["stats"]["overlap_mean"] < 1.0

    bm25 = BM25Retriever("bm25")
    bm25.open()
    bm25.index(docs)
    row = scale.run_queries("bm25", fx["questions"], lambda q: [h.doc_id for h in bm25.search(q, scale.K)], warmup=1)
    assert row["status"] == "ok" and row["latency"]["n"] == 10
    pooled = row["metrics"]["pooled"]
    assert pooled["n"] == 10 and 0.0 <= pooled["any@1"] <= pooled["any@5"] <= pooled["any@10"] <= 1.0
    grep = scale.RarestWordGrep(tmp_path / "vault", bm25)
    word = grep.pick(fx["questions"][0]["question"])
    assert word and word in fx["questions"][0]["question"].lower()
    row = scale.run_queries("grep -ril", fx["questions"][:3], grep.search, warmup=0)
    assert row["status"] == "ok" and row["metrics"]["pooled"]["n"] == 3
    conf = {"label": "tiny", "notes": 50, "semantic": False, "status": "ok", "systems": [row],
            "rebuild": {"notes_per_s": 10}, "fixture": {"notes": 50}}
    assert scale.target_checks(conf)[-1]["status"] == "FAIL"  # 10 notes/s < 2000
    assert scale.summary_rows({"configs": [conf]})


def test_process_and_disk_helpers(tmp_path):
    r = common.run_process([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], input_text="hi")
    assert r.returncode == 0 and r.stdout.strip() == "HI" and r.seconds > 0
    assert r.max_rss_kb is None or r.max_rss_kb > 0
    mem = common.proc_memory_kb(os.getpid())
    assert mem.get("VmRSS", 1) > 0
    (tmp_path / "index" / "lexical").mkdir(parents=True)
    (tmp_path / "index" / "lexical" / "seg").write_bytes(b"x" * 5000)
    (tmp_path / "catalog.sqlite").write_bytes(b"y" * 100)
    sizes = common.state_sizes(tmp_path)
    assert sizes["lexical"] >= 5000 and sizes["total"] >= sizes["lexical"] + sizes["catalog"]
    assert common.dir_bytes(tmp_path, apparent=True) == 5100


def test_capsule_benchmark_runs_on_a_small_vault(tmp_path):
    from benchmarks import capsule

    cfg = common.BenchConfig(mode="quick", bench_data=tmp_path, results_dir=tmp_path)
    res = capsule.run(cfg, memories=20)
    assert res["export"]["records"] == 20 and res["import_preview_new"]["counts"] == {"propose": 20}
    assert res["import_preview_existing"]["counts"] == {"skip": 20}
    assert res["import_enqueue"]["counts"] == {"proposed": 20}
    assert capsule.summary_rows(res) and capsule._rows(res)


def test_hive_brain_system_indexes_a_real_vault(tmp_path, monkeypatch):
    """The benchmarks drive the real engine: a change to `Engine.rebuild`'s signature must not turn every
    hive-brain row of LoCoMo, CMRC and the small-vault set into "error" (it did once: progress=False)."""
    from hive_brain.config import resolve
    from hive_brain.store.vault import init_vault

    monkeypatch.setenv("HIVE_BRAIN_MODEL_DIR", str(tmp_path / "no-pack"))  # lexical: fast
    vault = tmp_path / "vault"
    init_vault(vault, resolve())
    (vault / "Ann.md").write_text("**Ann** (D1:1): I adopted a puppy named Biscuit.\n", encoding="utf-8")
    r = HiveBrainRetriever(vault)
    r.open()
    r.index([])
    assert "Ann.md" in [h.doc_id for h in r.search("what is the name of Ann's puppy?", 5)]


def test_tune_prompt_gate_lexical_record_on_an_unindexed_vault_says_so(tmp_path, monkeypatch):
    """`tune_prompt_gate record --lexical --vault V` where nothing is indexed yet: one line saying to
    rebuild, not an AttributeError on the None the read-only view is then (found by typing the view)."""
    import argparse

    from benchmarks import tune_prompt_gate
    from hive_brain.config import resolve
    from hive_brain.store.vault import init_vault

    monkeypatch.setenv("HIVE_BRAIN_MODEL_DIR", str(tmp_path / "no-pack"))
    vault = tmp_path / "vault"
    init_vault(vault, resolve())
    for k in ("HIVE_BRAIN_STATE_DIR", "HIVE_BRAIN_AUTOSTART", "HIVE_BRAIN_USE_SERVER"):
        monkeypatch.setenv(k, "")  # record() sets them: restored after the test
    args = argparse.Namespace(work=str(tmp_path / "work"), size=0, lexical=True, vault=str(vault),
                              state=str(tmp_path / "state"))
    with pytest.raises(SystemExit, match="nothing is indexed in .*rebuild-index"):
        tune_prompt_gate.record(args)


# --------------------------------------------------------------------------- prompt hook benchmark


def _rec(style: str, needs: list[str], injected: list[tuple[str | None, bool]], chars: int = 0,
         split: str = "tune") -> dict:
    return {"style": style, "split": split, "needs": needs, "chars": chars,
            "injected": [{"key": k, "old": old} for k, old in injected]}


def test_prompt_hook_metrics_arithmetic():
    from benchmarks.prompt_hook import breakdown, metrics

    recs = [
        _rec("question", ["a"], [("a", False), ("x", False)], 800),          # right, first
        _rec("question", ["b"], [("x", False), ("b", False)], 600),          # right, not first
        _rec("followup", ["c"], [(None, True)], 300, split="held"),          # only an old version: wrong
        _rec("followup", ["d"], [("d", False)], 200, split="held"),          # resolved
        _rec("chitchat", [], [], 0),                                          # quiet
        _rec("chitchat", [], [("x", False)], 500, split="held"),             # noisy chit-chat
        _rec("coding", [], [], 0, split="held"),
        _rec("coding", [], [("y", False), ("z", False), (None, True)], 900),  # noisy, with an old version
    ]
    m = metrics(recs)
    assert (m["n"], m["n_need"], m["n_none"]) == (8, 4, 4)
    assert m["right"] == 0.75 and m["first"] == 0.5
    assert m["quiet"] == 0.5 and m["quiet_chitchat"] == 0.5
    assert m["items"] == round((2 + 2 + 1 + 1 + 1 + 3) / 6, 2)
    assert m["chars"] == round((800 + 600 + 300 + 200 + 500 + 900) / 6, 2)
    assert m["chars_per_nomem"] == round((0 + 500 + 0 + 900) / 4, 2)
    assert m["old_injected"] == 2
    assert m["followup_resolved"] == 0.5
    assert m["balanced"] == round((0.75 + 0.5) / 2, 3)
    b = breakdown(recs)
    assert b["tune"]["n"] == 4 and b["held"]["n"] == 4 and b["all"] == m
    assert b["styles"]["chitchat"]["quiet"] == 0.5 and "typo" not in b["styles"]
    empty = metrics([])
    assert empty["right"] is None and empty["balanced"] is None and empty["old_injected"] == 0


def test_prompt_hook_context_parsing_and_oracle_threshold():
    from benchmarks.prompt_hook import NoteMap, oracle, parse_context

    ctx = ("[hive-brain: hybrid recall]\n<hive-brain-recall>\n"
           "### Beta builds (procedure, 2026-12-02, mem-1) — Memory/a.md\n> text\n(supersedes 1 earlier version: mem-0)\n\n"
           "### json.dumps — Reference/python/json/dumps.md\n> more\n</hive-brain-recall>\n")
    assert parse_context(ctx) == [{"title": "Beta builds", "path": "Memory/a.md"},
                                  {"title": "json.dumps", "path": "Reference/python/json/dumps.md"}]
    assert parse_context("") == []
    notes = NoteMap({"head": {"beta": "Memory/a.md"}, "old": {"beta": ["Memory/a0.md"]},
                     "titles": {"Memory/a.md": "Beta builds", "Memory/a0.md": "Beta builds",
                                "Reference/python/json/dumps.md": "json.dumps"}})
    assert notes.item("Memory/a.md")["key"] == "beta"
    old = notes.item("Memory/a0.md")
    assert old["key"] is None and old["old"] and old["oldOf"] == "beta"
    prompts = [{"id": "p1", "style": "question", "split": "tune", "needs": ["beta"]},
               {"id": "p2", "style": "chitchat", "split": "held", "needs": []}]
    scores = {"p1": [("Memory/a.md", 5.0)], "p2": [("Reference/python/json/dumps.md", 3.0)]}
    t, recs = oracle(scores, prompts, notes, k=1)
    assert t == 5.0  # the one threshold that injects for p1 and stays quiet on p2
    assert [len(r["injected"]) for r in recs] == [1, 0]


def test_prompt_data_is_labelled_consistently():
    from benchmarks.prompt_hook import STYLES, load_data

    memories, prompts = load_data()  # check_data raises on a dangling label or a follow-up without reply
    assert len(memories) >= 60 and sum(1 for m in memories if m.get("evolve")) >= 8
    assert len(prompts) >= 130
    for st in STYLES:
        assert sum(1 for p in prompts if p["style"] == st) >= 8, st
    need = sum(1 for p in prompts if p["needs"]) / len(prompts)
    assert 0.40 <= need <= 0.50
    first = [p for p in prompts if p["split"] in ("tune", "held")]
    tune = sum(1 for p in first if p["split"] == "tune") / len(first)
    assert 0.45 <= tune <= 0.55
    blind = [p for p in prompts if p["split"] in ("fresh", "confirm")]  # written blind, from the memories alone
    assert len(blind) >= 100 and {p["style"] for p in blind} == set(STYLES)
    for half in ("fresh", "confirm"):
        assert {p["style"] for p in blind if p["split"] == half} == set(STYLES), half
    # The writer's names (prompt_hook --names): one entry per memory, questions as remember takes them.
    names = json.loads((Path(__file__).parents[1] / "benchmarks/prompts/memory_names.json").read_text(encoding="utf-8"))
    assert set(names) == {m["key"] for m in memories}
    assert all(3 <= len(v["questions"]) <= 5 and len(v["aliases"]) <= 3 for v in names.values())


def test_typo_and_imperative_sets_name_real_memories():
    from benchmarks.prompt_hook import load_data
    from benchmarks.typo_prompts import DATA, is_typo_set

    keys = {m["key"] for m in load_data()[0]}
    for name, typo in (("typos.json", True), ("typos_fresh.json", True), ("imperatives.json", False)):
        data = json.loads((DATA / name).read_text(encoding="utf-8"))
        assert is_typo_set(data) is typo, name
        assert len({t["id"] for t in data}) == len(data), name
        for t in data:
            assert set(t["needs"]) <= keys, (name, t["id"])
            assert t["needs"] or not typo, (name, t["id"])  # every typo'd question is answerable
    imperatives = json.loads((DATA / "imperatives.json").read_text(encoding="utf-8"))
    assert sum(1 for t in imperatives if t["needs"]) == 30 and sum(1 for t in imperatives if not t["needs"]) == 15


def test_prompt_refs_order_is_a_seeded_prefix():
    from benchmarks.prompt_refs import _cap, choose

    paths = [f"Reference/python/m{i}.md" for i in range(50)]
    small, large = choose(paths, 10), choose(list(reversed(paths)), 30)
    assert large[:10] == small and len(set(large)) == 30
    assert choose(paths, 10, seed=1) != small
    text = "\n\n".join(["a" * 40] * 10)
    assert _cap(text, 100) == "\n\n".join(["a" * 40] * 2)


def test_prompt_hook_names_file_that_cannot_be_used_is_one_line_before_any_build(tmp_path):
    """`prompt_hook --names` with a missing file, a file that is no JSON object, or names for a memory
    that does not exist: one line saying what to pass, before any vault is built (it was a traceback)."""
    from benchmarks.prompt_hook import load_data, load_names

    memories = load_data()[0]
    bad_key = tmp_path / "names.json"
    bad_key.write_text(json.dumps({"no-such-memory": {"aliases": [], "questions": []}}), encoding="utf-8")
    listed = tmp_path / "list.json"
    listed.write_text("[]", encoding="utf-8")
    for path, said in ((tmp_path / "missing.json", "cannot read it"), (listed, "expected an object"),
                       (bad_key, "unknown memory keys: no-such-memory")):
        with pytest.raises(SystemExit) as e:
            load_names(path, memories)
        assert said in str(e.value) and "\n" not in str(e.value), e.value
    good = load_names(Path(__file__).parents[1] / "benchmarks/prompts/memory_names.json", memories)
    assert len(good) == len(memories)
