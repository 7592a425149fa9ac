"""Recall in a developer's own small vault, with the real model: off-topic prompts abstain at 20 and at
2,000 notes, an evolved memory is first for the question it answers, aliases and inline #tags find a
note (benchmarks/smallvault.py measures the same on a larger set)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hive_brain.engine import Engine

MEMORIES = [
    ("decision", "Hosting", "The web app is deployed on Fly.io in the ams region; we moved off Heroku because of dyno prices."),
    ("preference", "Commit messages", "Write commit messages in the imperative mood, subject under 72 characters."),
    ("lesson", "Memory leak in worker", "The Celery worker leaked memory because tasks kept the request payload in a list."),
    ("decision", "Customer support tool", "Customer emails and tickets land in Help Scout; Dana triages them every morning."),
    ("fact", "Staging URL", "Staging lives at https://staging.quillpad.dev and is reset from a production snapshot weekly."),
    ("preference", "Package manager", "Use npm for JavaScript dependencies and commit package-lock.json."),
    ("preference", "Editor tabs", "Indent with two spaces in JavaScript files, four in Python; never hard tabs."),
    ("decision", "Test framework", "Backend tests use pytest; frontend tests use Vitest."),
    ("procedure", "On-call rota", "On-call rotates weekly on Monday between Priya, Tomás and me; handover in #ops."),
    ("procedure", "Database migrations", "Run alembic upgrade head on staging first, then production in the Tuesday window."),
    ("person", "Priya Raman", "Priya is the backend lead; she owns the billing service and reviews in the afternoon."),
    ("lesson", "Docker cache", "CI builds were slow because COPY . came before pip install; copy requirements first."),
    ("fact", "PDF export service", "The PDF export keeps rendered pages in the zorbulator, our Redis-backed page cache."),
    ("decision", "Dependency updates", "Renovate opens grouped dependency PRs every Monday; merge patch updates when green."),
    ("fact", "Internal tools cluster", "Metabase and Unleash run on a small k3s cluster on Hetzner. #k8s"),
    ("procedure", "Production release steps", "Merge to main, wait for the green build, run fly deploy, watch Sentry."),
]
ALIASES = {"Production release steps": ["shipping", "deploy to prod"]}
OFF_TOPIC = ["what year did the Berlin wall fall?", "how does photosynthesis work?",
             "what is the capital of Australia?", "explain the CAP theorem briefly"]


def _remember_all(eng: Engine) -> dict[str, str]:
    recs = [{"type": t, "title": title, "content": body, "aliases": ALIASES.get(title, [])}
            for t, title, body in MEMORIES]
    out = eng.memory.batch(recs)
    return {title: r["id"] for (_t, title, _b), r in zip(MEMORIES, out["records"], strict=True)}


@pytest.fixture
def small(vault_path: Path, with_model: Path) -> tuple[Engine, dict[str, str]]:
    eng = Engine.open(vault_path)
    return eng, _remember_all(eng)


def _refuses_off_topic_and_finds_hosting(eng: Engine, ids: dict[str, str]) -> None:
    for q in OFF_TOPIC:
        res = eng.recall(q, limit=5)
        assert res["abstained"], (q, [h["title"] for h in res["hits"]])
    res = eng.recall("where is the website hosted?", limit=5)
    assert not res["abstained"] and res["hits"][0]["id"] == ids["Hosting"]


def test_off_topic_abstains_and_a_paraphrase_answers_in_a_small_vault(small):
    eng, ids = small
    _refuses_off_topic_and_finds_hosting(eng, ids)


def test_an_off_topic_prompt_that_sounds_close_abstains_word_by_word(small, monkeypatch):
    """"explain the Rust borrow checker" passed on the pooled cosine gap (to "Core Memory"). The second
    model (search/rerank.py) finds nothing nearer to it than unrelated text; without that model, late
    interaction (word by word against the background) refuses it too; with neither, the cosine rule let it
    through. The paraphrases the issue lists still answer."""
    from hive_brain.search.params import PARAMS

    eng, _ids = small
    q = "explain the Rust borrow checker to a beginner"
    res = eng.recall(q, limit=5)
    assert res["abstained"] and "nearer to it than unrelated text" in res["reason"], [h["title"] for h in res["hits"]]
    # Answered (what is ranked first is the ranking's business, not abstention's).
    for p in ("which cloud runs our website?", "the background processor keeps growing in RAM",
              "how do I roll out a schema change?", "where do customer complaints arrive?"):
        res = eng.recall(p, limit=5)
        assert not res["abstained"], (p, res.get("reason"))
    assert not eng.recall("预发布环境的地址是什么？", limit=5)["abstained"]  # not English: the cosine rule
    monkeypatch.setitem(PARAMS, "w_rr", 0.0)
    res = eng.recall(q, limit=5)
    assert res["abstained"] and "better than unrelated text" in res["reason"]
    monkeypatch.setitem(PARAMS, "late_abstain", 0.0)  # the cosine rule alone let it through
    assert not eng.recall(q, limit=5)["abstained"]


def test_evolved_memory_is_first_for_the_question_it_answers(small):
    eng, ids = small
    new = eng.memory.evolve(ids["Package manager"], "Use pnpm for JavaScript dependencies and commit "
                                                    "pnpm-lock.yaml; npm lockfiles are deleted.")
    for q in ("which node dependency tool should I use?", "which package manager do we use for node?"):
        res = eng.recall(q, limit=5)
        assert res["hits"] and res["hits"][0]["id"] == new["id"], (q, [h["title"] for h in res["hits"]])


def test_a_note_is_found_by_its_alias_and_by_an_inline_tag(small):
    eng, ids = small
    for q in ("shipping", "how do I deploy to prod?"):
        res = eng.recall(q, limit=5)
        assert res["hits"][0]["id"] == ids["Production release steps"], (q, [h["title"] for h in res["hits"]])
    res = eng.recall("where do the internal dashboards run?", tags=["k8s"], limit=5, abstain=False)
    assert [h["id"] for h in res["hits"]] == [ids["Internal tools cluster"]]
    assert eng.recall("where do the internal dashboards run?", tags=["#k8s"], limit=5, abstain=False)["hits"]


def test_an_alias_that_is_the_whole_question_beats_a_note_with_the_word(vault_path: Path, with_model: Path):
    """An alias is another title: "shipping" names "Production release steps", yet "Logging format"
    ("logs ship to Better Stack") was first in the benchmark's 70 memories (the stem in its text, and
    e5 ranks it higher; the question has no English word, so the second model keeps the first pass).
    smallvault's held alias question at 81 and 511 notes (docs/benchmarks.md, stop 23)."""
    import json

    mems = json.loads((Path(__file__).parents[1] / "benchmarks" / "smallvault" / "memories.json").read_text("utf-8"))
    eng = Engine.open(vault_path)
    ids: dict[str, str] = {}
    for i in range(0, len(mems), 25):  # a batch holds at most 25 records
        chunk = mems[i:i + 25]
        out = eng.memory.batch([{"type": m["type"], "title": m["title"], "content": m["content"],
                                 "tags": m.get("tags") or [], "aliases": m.get("aliases") or [],
                                 "memory_key": f"{m['type']}/{m['key']}"} for m in chunk])
        ids.update({m["title"]: r["id"] for m, r in zip(chunk, out["records"], strict=True)})
    res = eng.recall("shipping", limit=5)
    assert res["hits"][0]["id"] == ids["Production release steps"], [h["title"] for h in res["hits"]]


def test_the_rare_word_beats_the_common_one(small):
    eng, ids = small
    res = eng.recall("zorbulator cache", limit=5)
    assert res["hits"][0]["id"] == ids["PDF export service"], [h["title"] for h in res["hits"]]


_SERVICES = ["billing", "search", "auth", "export", "gateway", "sync", "mailer", "reports", "uploads", "notify"]
_FACTS = ["The {s} service {n} listens on port {p}.", "The {s} service {n} is owned by team {t}.",
          "Deploys of {s} service {n} happen on {d}.", "The {s} service {n} stores its data in {db}.",
          "Alerts for {s} service {n} go to the {t} channel.", "Tests for {s} service {n} run with make test-{n}."]


@pytest.mark.slow
def test_off_topic_abstains_in_a_2000_note_vault(vault_path: Path, with_model: Path):
    rng = random.Random(7)
    mem = vault_path / "Memory"
    mem.mkdir(exist_ok=True)
    for i in range(1984):
        text = rng.choice(_FACTS).format(s=rng.choice(_SERVICES), n=i, p=rng.randint(2000, 9999),
                                         t=rng.choice(["red", "blue", "green", "core"]),
                                         d=rng.choice(["Monday", "Tuesday", "Thursday"]),
                                         db=rng.choice(["Postgres", "Redis", "S3", "SQLite"]))
        (mem / f"fact-{i:04d}.md").write_text(f"---\ntitle: Service fact {i}\n---\n\n{text}\n", encoding="utf-8")
    eng = Engine.open(vault_path)
    eng.rebuild()
    ids = _remember_all(eng)
    _refuses_off_topic_and_finds_hosting(eng, ids)


def test_late_interaction_second_pass_reranks_the_top_when_weighted(small, monkeypatch):
    """Off by default (``w_li`` 0: it did not move the held half of benchmarks/smallvault); with a
    weight, the top ``li_top`` candidates get a MaxSim rank, reported in scoreDetails, and the warm
    token cache makes the second recall of the same notes cheaper."""
    from hive_brain.search import late
    from hive_brain.search.params import PARAMS

    eng, ids = small
    monkeypatch.setitem(PARAMS, "w_rr", 0.0)  # the late pass alone: the second model reorders the hits too
    res = eng.recall("where is the website hosted?", limit=5)
    assert "lateMs" not in res["timing"] and res["hits"][0]["scoreDetails"]["lateRank"] is None
    monkeypatch.setitem(PARAMS, "w_li", 1.0)
    monkeypatch.setitem(PARAMS, "li_top", 5)
    res = eng.recall("where is the website hosted?", limit=5, abstain=False, drop_ratio=0.0)
    assert "lateMs" in res["timing"] and res["hits"][0]["id"] == ids["Hosting"]
    ranked = [h["scoreDetails"] for h in res["hits"] if h["scoreDetails"]["lateRank"] is not None]
    assert 1 <= len(ranked) <= 5 and all(0 < d["lateInteraction"] <= 1 for d in ranked)
    assert sorted(d["lateRank"] for d in ranked) == list(range(len(ranked)))
    cached = len(late._CACHE)
    eng.recall("where is the website hosted?", limit=5, abstain=False, drop_ratio=0.0)
    assert len(late._CACHE) == cached  # the same passages: nothing new through the model
