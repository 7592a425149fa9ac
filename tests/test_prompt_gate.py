"""The prompt hook speaks only when it helps (issue 25), with the real model on small data: an
acknowledgement and a generic coding task inject nothing in a 20-note and a 2,000-note vault, a
follow-up finds what the previous reply points to even when the prompt alone fills the list, and a
strong single hit is injected alone. ``search.prompt.contextual_answer`` is what the server's
``prompt`` op and the in-process fallback both run (benchmarks/prompt_hook.py measures the hook as
installed; benchmarks/tune_prompt_gate.py the gate's curve)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hive_brain.engine import Engine
from hive_brain.search.prompt import contextual_answer

MEMORIES = [
    ("decision", "Hosting", "The web app is deployed on Fly.io in the ams region; we moved off Heroku because of dyno prices."),
    ("preference", "Commit messages", "Write commit messages in the imperative mood, subject under 72 characters."),
    ("lesson", "Memory leak in worker", "The Celery worker leaked memory because tasks kept the request payload in a list."),
    ("decision", "Customer support tool", "Customer emails and tickets land in Help Scout; Dana triages them every morning."),
    ("fact", "Staging URL", "Staging lives at https://staging.quillpad.dev and is reset from a production snapshot weekly."),
    ("preference", "Package manager", "Use pnpm for JavaScript dependencies and commit pnpm-lock.yaml."),
    ("preference", "Editor tabs", "Indent with two spaces in JavaScript files, four in Python; never hard tabs."),
    ("decision", "Test framework", "Backend tests use pytest with the fixtures in conftest.py; frontend tests use Vitest."),
    ("procedure", "On-call rota", "On-call rotates weekly on Monday between Priya, Tomás and me; handover in #ops."),
    ("procedure", "Database migrations", "Run alembic upgrade head on staging first, then production in the Tuesday window."),
    ("person", "Priya Raman", "Priya is the backend lead; she owns the billing service and reviews in the afternoon."),
    ("lesson", "Docker cache", "CI builds were slow because COPY . came before pip install; copy requirements first."),
    ("fact", "PDF export service", "The PDF export keeps rendered pages in the zorbulator, our Redis-backed page cache."),
    ("decision", "Dependency updates", "Renovate opens grouped dependency PRs every Monday; merge patch updates when green."),
    ("fact", "Internal tools cluster", "Metabase and Unleash run on a small k3s cluster on Hetzner."),
    ("procedure", "Production release steps", "Merge to main, wait for the green build, run fly deploy, watch Sentry."),
    ("preference", "Go formatting", "Go code is formatted with gofumpt and goimports before every commit; CI fails otherwise."),
    ("fact", "Where the logs are", "Application logs go to Better Stack; search them by request id from the Sentry event."),
    ("lesson", "Flaky date test", "The invoice test failed around midnight because it compared with today's date; freeze time."),
    ("decision", "Feature flags", "New features ship behind Unleash flags and roll out to 10% of workspaces first."),
]
ACKS = ["go on", "keep going", "thanks!", "ok", "lgtm", "yes please"]
CODING = ["write a unit test for a function that turns titles into URL slugs",
          "explain what `tail -n 50 app.log | grep ERROR` does",
          "how do I reverse a string in Go?",
          "write a function that formats a number with thousands separators"]


def _remember_all(eng: Engine) -> dict[str, str]:
    out = eng.memory.batch([{"type": t, "title": title, "content": body} for t, title, body in MEMORIES])
    return {title: r["id"] for (_t, title, _b), r in zip(MEMORIES, out["records"], strict=True)}


def _pack(eng: Engine, prompt: str, context: str = "") -> dict:
    return contextual_answer(lambda q, **o: eng.recall(q, **o), prompt, context, budget=6000)


def _quiet(eng: Engine) -> None:
    for p in ACKS + CODING:
        pack = _pack(eng, p)
        assert pack["abstained"] and not pack["items"], (p, [it["path"] for it in pack["items"]], pack.get("gate"))


@pytest.fixture
def small(vault_path: Path, with_model: Path) -> tuple[Engine, dict[str, str]]:
    eng = Engine.open(vault_path)
    return eng, _remember_all(eng)


def test_an_acknowledgement_and_a_generic_coding_task_inject_nothing_in_a_20_note_vault(small):
    """Before the gate "go on" brought the Go memory (and more), "write a unit test ..." the test
    memories: they share a word with the prompt, and the list filled with whatever did."""
    eng, ids = small
    _quiet(eng)
    # The vault still answers.
    for prompt, title in (("which package manager do we use for the frontend?", "Package manager"),
                          ("where is the web app hosted?", "Hosting")):
        pack = _pack(eng, prompt)
        assert [it["id"] for it in pack["items"]][:1] == [ids[title]], (prompt, pack.get("gate"))


_WORDS = ["test", "format", "log", "release", "token", "build", "parse", "date", "string", "error", "file", "read", "write", "value", "list", "function", "module", "class", "option", "config", "default", "type", "return", "object", "field", "record", "stream"]


@pytest.mark.slow
def test_an_acknowledgement_and_a_generic_coding_task_inject_nothing_in_a_2000_note_vault(vault_path: Path,
                                                                                          with_model: Path):
    """1,980 reference notes (kind ``note``, generic programming words, as pasted docs are) beside
    the 20 memories: more notes share a word with any prompt, and the best of them comes nearer."""
    rng = random.Random(25)
    ref = vault_path / "Reference"
    ref.mkdir()
    for i in range(1980):
        a, b, c, d = rng.sample(_WORDS, 4)
        text = (f"The {a} helper {i} takes a {b} and returns its {c}. Pass a {d} to change the default; "
                f"it raises an error when the {b} cannot be read. See also the {c} {d} section.")
        (ref / f"{a}-{b}-{i:04d}.md").write_text(f"---\ntitle: {a} {b} {i}\n---\n\n# {a} {b}\n\n{text}\n",
                                                 encoding="utf-8")
    eng = Engine.open(vault_path)
    eng.rebuild()
    ids = _remember_all(eng)
    _quiet(eng)
    pack = _pack(eng, "which package manager do we use for the frontend?")
    assert [it["id"] for it in pack["items"]][:1] == [ids["Package manager"]], pack.get("gate")


def test_a_follow_up_finds_its_referent_when_the_prompt_alone_fills_the_list(small):
    """The prompt alone matches many notes; the previous reply names the one it is about. Before, the
    prompt + reply search ran only when the first list had room (``len(hits) < limit``)."""
    eng, ids = small
    prompt = "deploy it to staging then production on monday"
    assert len(eng.recall(prompt, limit=6, pool=60)["hits"]) == 6  # the prompt alone fills the list
    reply = ("I fixed the memory leak in the worker: the Celery tasks no longer keep the request payload "
             "in a list, and the worker's memory stays flat in the soak test.")
    pack = _pack(eng, prompt, reply)
    assert [it["id"] for it in pack["items"]][:1] == [ids["Memory leak in worker"]], pack.get("gate")


def test_a_strong_single_hit_is_injected_alone(small):
    """One memory answers; the others that share a word or a topic with the prompt were injected
    after it (they passed recall's weaker test for later hits)."""
    eng, ids = small
    for prompt, title in (("which package manager do we use for the frontend?", "Package manager"),
                          ("who owns the billing service?", "Priya Raman"),
                          ("where do the application logs go?", "Where the logs are")):
        res = eng.recall(prompt, limit=6, pool=60)
        assert len(res["hits"]) > 1, prompt  # recall alone keeps more than the answer
        pack = _pack(eng, prompt)
        assert [it["id"] for it in pack["items"]] == [ids[title]], (prompt, pack.get("gate"))


def test_do_the_same_for_another_part_finds_what_both_the_prompt_and_the_reply_point_to(small):
    """"do the same for the android code" after a reply about reformatting Go files: no note's title
    is in the conversation, so nothing was a referent, and the prompt alone brought the Android UI
    note. What is asked is the Kotlin formatting note, which the prompt alone and the prompt + reply
    both find (``hook_referent_agree``)."""
    eng, ids = small
    out = eng.memory.batch([{"type": "preference", "title": "Kotlin formatting", "tags": ["android"],
                             "content": "Kotlin is formatted with ktfmt through the spotless Gradle plugin; "
                                        "run ./gradlew spotlessApply before pushing the Android app."},
                            {"type": "decision", "title": "Android UI architecture", "tags": ["android"],
                             "content": "The Android app uses Jetpack Compose with one ViewModel per screen."}])
    kotlin = out["records"][0]["id"]
    reply = ("I reformatted the Go files in internal/billing with the formatter and fixed the import "
             "grouping; the lint job is green again.")
    pack = _pack(eng, "do the same for the android code", reply)
    assert [it["id"] for it in pack["items"]][:1] == [kotlin], (pack.get("gate"), [it["path"] for it in pack["items"]])



def _hit(path: str, kind: str, rerank_gap: float, semantic_gap: float) -> dict:
    return {"path": path, "kind": kind, "status": "current",
            "scoreDetails": {"rerankGap": rerank_gap, "semanticGap": semantic_gap, "coverage": 0.3,
                             "specificity": 0.6, "floorAllowance": 0.0159}}


def test_a_reference_page_near_a_typed_memory_is_no_rival_for_its_clear_lead():
    """At +3,000 reference notes (benchmarks/prompt_hook.py, "what flag sytem do we use to turn featrues
    on gradualy") the *Feature flags* memory led at 0.25, under the 0.28 bar but clear of every other
    memory; a documentation page the second model put at 0.23 (which needs 0.68 itself) took its clear
    lead away, and nothing was injected. Alone, or among the 77 notes, it passed. Numbers as recorded."""
    from hive_brain.search.abstain import hook_gate

    def memory() -> dict:
        return _hit("Memory/feature-flags.md", "memory", 0.2381, 0.0267)

    notes = [_hit("Reference/FlagBoundary.md", "note", 0.2142, 0.0314),
             _hit("Reference/set_unittest_reportflags.md", "note", 0.1276, 0.0186)]
    alone, _why = hook_gate([memory()], [], short=False)
    assert [h["path"] for h in alone] == ["Memory/feature-flags.md"]
    kept, why = hook_gate([memory(), *notes], [], short=False)
    assert [h["path"] for h in kept] == ["Memory/feature-flags.md"], why
    assert kept[0]["scoreDetails"]["hookGate"]["clear"] >= 0.08
    # Another typed memory that near is a rival: among equals the lead is not clear.
    rival = _hit("Memory/release-train.md", "memory", 0.2142, 0.0314)
    kept, _why = hook_gate([memory(), rival, *notes], [], short=False)
    assert kept == []


def test_a_pasted_error_brings_no_note_that_holds_none_of_its_words(vault_path: Path, with_model: Path):
    """What a new user meets first: the demo vault (``hive-brain demo``, six memories), a pasted git
    error. The second model reads no prompt without English function words, so e5's gap decided alone,
    and *Flaky sync test* (0.036 over the 0.02 bar, not one of the prompt's words in it) was injected.
    The notes that do hold the prompt's words, and prompts in another script, still answer."""
    from hive_brain.cli.demo import run_demo
    from hive_brain.config import resolve

    run_demo(vault_path, resolve(), semantic=True)
    eng = Engine.open(vault_path)
    pack = _pack(eng, "git push rejected: non-fast-forward")
    assert not pack["items"], ([it["path"] for it in pack["items"]], pack.get("gate"))
    for prompt, title in (("test_sync race", "Flaky sync test"), ("why does the sync test keep failing?", "Flaky sync test"),
                          ("什么时候发布新版本？", "部署时间")):
        pack = _pack(eng, prompt)
        assert [it["path"] for it in pack["items"]][:1] and title in pack["context"], (prompt, pack.get("gate"))


def test_e5_alone_needs_more_for_a_note_with_none_of_a_latin_prompts_words():
    """The recorded numbers: the demo's pasted git error (above), and a Chinese prompt of the prompt-hook
    set whose memory is English (mixed-07, e5 gap 0.054, no shared word: its script shares none)."""
    from hive_brain.search.abstain import hook_gate

    def e5(path: str, gap: float, coverage: float, specificity: float) -> dict:
        return {"path": path, "kind": "memory", "status": "active",
                "scoreDetails": {"rerankGap": None, "semanticGap": gap, "coverage": coverage,
                                 "specificity": specificity, "floorAllowance": 0.0}}

    demo = [e5("Memory/release-steps.md", 0.0137, 0.167, 1.0), e5("Memory/flaky-sync-test.md", 0.0357, 0.0, 0.0)]
    kept, why = hook_gate(demo, [], short=True, latin=True)
    assert kept == [] and why, [h["path"] for h in kept]
    assert demo[1]["scoreDetails"]["hookGate"]["need"] == 0.06
    kept, _why = hook_gate([e5("Memory/car-deck-capacity.md", 0.0544, 0.0, 0.0)], [], short=False, latin=False)
    assert [h["path"] for h in kept] == ["Memory/car-deck-capacity.md"]


def test_a_note_well_under_the_best_is_not_injected_beside_it():
    """Recorded at 77 notes (benchmarks/prompt_hook.py, mixed-05 "iOS app 最低支持哪个系统版本?"): the
    right memory at 3.7 times its bar, then notes at 2.1, 1.6 and 1.2 times theirs, all over the bar and
    three injected. Under ``hook_rel`` 0.7 of the best's strength a note stays out; notes as strong as
    the best (filepath-01, a migration's path: 2.4, 2.2, 2.5 times) all stay, in recall's order."""
    from hive_brain.search.abstain import hook_gate

    def e5(path: str, gap: float, words: float) -> dict:
        return {"path": path, "kind": "memory", "status": "active",
                "scoreDetails": {"rerankGap": None, "semanticGap": gap, "coverage": words, "specificity": 1.0,
                                 "floorAllowance": 0.0}}

    ios = [e5("minimum-ios-version.md", 0.0743, 0.0844), e5("ios-app-architecture.md", 0.0428, 0.0844),
           e5("push-on-the-ios-simulator.md", 0.0237, 0.0454), e5("forced-app-update.md", 0.031, 0.0332)]
    kept, _why = hook_gate(ios, [], short=False)
    assert [h["path"] for h in kept] == ["minimum-ios-version.md"]
    gate = [h["scoreDetails"]["hookGate"] for h in ios]
    assert gate[1]["strength"] < 0.7 * gate[0]["strength"] and not gate[1]["kept"], gate
    path = [e5("database-migrations.md", 0.0489, 0.346), e5("harbor-api-stack.md", 0.0433, 0.2837),
            e5("local-database-port.md", 0.0502, 0.1479)]
    kept, _why = hook_gate(path, [], short=False)
    assert [h["path"] for h in kept] == ["database-migrations.md", "harbor-api-stack.md", "local-database-port.md"]


def test_the_lexical_answer_keeps_notes_under_the_best_by_words():
    """Words alone (no server yet) are no strength to rank answers by: at 577 notes "do the same for the
    android code" found five notes naming Android at 0.45 and *Feature flags* at 0.68 (its words hold
    "same"); cutting under 0.7 of the best left only that one (recorded numbers)."""
    from hive_brain.search.abstain import hook_gate

    def lexical(path: str, coverage: float) -> dict:
        return {"path": path, "kind": "memory", "status": "active",
                "scoreDetails": {"coverage": coverage, "specificity": 1.0}}

    hits = [lexical(p, 0.4521) for p in ("android-ui-architecture.md", "android-ci-out-of-memory.md",
                                         "kotlin-formatting.md", "kwame-mensah.md", "gate-scanner-app.md")]
    kept, _why = hook_gate([*hits, lexical("feature-flags.md", 0.684)], [], short=True)
    assert [h["path"] for h in kept] == ["android-ui-architecture.md", "android-ci-out-of-memory.md", "kotlin-formatting.md"]


def test_a_reference_page_named_in_the_reply_does_not_shut_out_the_memory_it_points_to():
    """At +3,000 reference notes (benchmarks/prompt_hook.py, held follow-up "how do we check it holds up
    under real traffic before summer?" after a reply about the departures query): the lexical prompt +
    reply search put the pages "Real" and "join" ("real traffic", "joined query") 2nd and 3rd, inside the
    referent window. "Real" was named, so the agreement test never ran, and it was then refused as
    reference material: no referent, and the reply-only search injected *Slow departures endpoint*. Among
    the 77 notes *Load testing harbor* was in the window and the referent by agreement. Numbers as recorded."""

    def hit(title: str, kind: str, rr: float | None = None, gap: float | None = None, cov: float = 0.0) -> dict:
        slug = title.lower().replace(" ", "-")
        return {"path": f"{'Memory' if kind == 'memory' else 'Reference'}/{slug}.md", "id": slug, "title": title,
                "kind": kind, "status": "active", "passage": {"text": f"{title}."},
                "scoreDetails": {"rerankGap": rr, "semanticGap": gap, "coverage": cov, "specificity": 0.5,
                                 "floorAllowance": 0.0159 if gap is not None else 0.0}}

    def recall(q: str, **o: object) -> dict:
        if o.get("semantic") is False:  # the lexical prompt + reply search
            hits = [hit("Slow departures endpoint", "memory", cov=0.351), hit("Real", "note", cov=0.05),
                    hit("join", "note", cov=0.049), hit("Load testing harbor", "memory", cov=0.24),
                    hit("check", "note", cov=0.049)]
        elif "\n" in q:  # the prompt with the end of the reply, when nothing else passed
            hits = [hit("Slow departures endpoint", "memory", 0.3132, 0.0187, 0.351),
                    hit("Load testing harbor", "memory", 0.2595, 0.0114, 0.24)]
        else:  # the prompt alone
            hits = [hit("Load testing harbor", "memory", 0.1548, 0.0162, 0.275),
                    hit("sched_rr_get_interval", "note", -0.1253, 0.0104)]
        return {"hits": hits, "abstained": False, "reason": None}

    reply = ("The departures handler now uses the joined query, and the local p95 for GET /v2/departures went "
             "from 900 ms to 120 ms.")
    pack = contextual_answer(recall, "how do we check it holds up under real traffic before summer?", reply,
                             budget=6000)
    assert [it["path"] for it in pack["items"]][:1] == ["Memory/load-testing-harbor.md"], pack.get("gate")
