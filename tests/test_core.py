"""Core memory: core notes, the user's standing rules, the agent's lessons; de-duplicated, budgeted."""

from __future__ import annotations

from hive_brain.engine import Engine
from hive_brain.memory.core import clean_core_body, core_items, core_text
from tests.helpers import remember, run

CORE = (
    "---\ntitle: Core Memory\ntype: core\n---\n\n# Core Memory\n\n"
    "## About me\n- Ana, SRE at a small shop.\n- \n"
)


def test_clean_core_body_drops_empty_template_parts():
    body = "# Core Memory\n\nIntro.\n\n## About me\n- \n\n## How I work\n- Tests first.\n\n## Rules\n- \n"
    assert clean_core_body(body) == "# Core Memory\n\nIntro.\n\n## How I work\n- Tests first."


def test_template_core_note_alone_gives_nothing(vault_path):
    assert core_text(Engine.open(), "claude-code") == ""


def test_order_sources_and_dedup(vault_path):
    (vault_path / "Memory" / "Core Memory.md").write_text(CORE)
    agent_core = vault_path / "Agents" / "claude-code" / "Core Memory.md"
    agent_core.parent.mkdir(parents=True)
    agent_core.write_text("Prefer small pull requests in this vault's repos.\n")
    remember("Tabs", "Indent Go code with tabs.", "preference")
    remember("Answer language", "Answer in English.", "instruction")
    remember("Database", "We chose Postgres over MySQL.", "decision")
    remember("Some fact", "The office is in Lisbon.", "fact")  # not a standing rule
    remember("Lockfile", "Commit the lockfile with dependency bumps.", "lesson", agent="claude-code")
    remember("Agent said", "An agent-proposed shared preference.", "preference", "--memory-scope", "hive", agent="claude-code")  # origin agent: not a user rule
    eng = Engine.open(agent_id="claude-code")
    items = core_items(eng, "claude-code")
    assert [i["section"] for i in items] == [
        "core",
        "agent-core",
        "instruction",
        "preference",
        "decision",
        "lesson",
    ]
    text = core_text(eng, "claude-code")
    assert "Ana, SRE" in text and "small pull requests" in text and "Answer in English." in text
    assert "Lisbon" not in text and "agent-proposed" not in text
    assert (
        text.index("Answer in English")
        < text.index("Indent Go")
        < text.index("Postgres")
        < text.index("lockfile")
    )
    # No agent: no private lessons, no agent core note.
    owner = core_text(Engine.open(), None)
    assert "lockfile" not in owner and "small pull requests" not in owner and "Answer in English." in owner


def test_same_key_or_content_appears_once(vault_path):
    from hive_brain.store.notes import render

    remember("Answer language", "Answer in English.", "instruction")
    # A hand-made copy (same content hash, e.g. synced twice) must not be listed twice.
    eng = Engine.open()
    eng.catalog.refresh()
    e = eng.catalog.memories()[0]
    meta = dict(e.meta, id="mem-copy0000000000000000000000", memory_key="instruction/answer-language-copy")
    (vault_path / "Memory" / "Distillations" / "Agent Memory" / "copy.md").write_text(
        render(meta, "Answer in English.\n")
    )
    text = core_text(eng, None)
    assert len(eng.catalog.memories()) == 2
    assert text.count("Answer in English.") == 1


def test_budget_is_respected(vault_path):
    import json

    recs = [
        {
            "type": "instruction",
            "title": f"Rule {i}",
            "content": f"Standing rule number {i}: " + "be careful " * 20,
        }
        for i in range(25)
    ]
    run("batch", "--file", "-", input=json.dumps(recs))
    eng = Engine.open()
    text = core_text(eng, None, budget=1500)
    assert 0 < len(text) <= 1500
    res = run("core", "--budget", "1500")
    assert res["chars"] <= 1500 and res["items"] and res["text"] == text


def test_core_cli_agent_flag(vault_path):
    remember("Sandbox", "The sandbox has no network; vendor the test fixtures.", "lesson", agent="codex")
    assert "vendor the test fixtures" in run("core", "--agent", "codex")["text"]
    assert run("core")["text"] == ""


def test_lessons_answers_keep_using_respect_visibility_and_stay_short(vault_path):
    from hive_brain.config import resolve
    from hive_brain.memory.core import USED_LESSONS, USED_MIN_RETRIEVED
    from hive_brain.memory.operations import record_usage
    from hive_brain.store.notes import render
    from hive_brain.store.vault import open_vault

    state = open_vault(resolve()).state
    shared = remember("Pin the base image", "Pin the Docker base image by digest.", "lesson")
    mine = remember("Lockfile", "Commit the lockfile with dependency bumps.", "lesson", agent="claude-code")
    theirs = remember("Codex sandbox", "The codex sandbox has no network.", "lesson", agent="codex")
    unused = remember("Never used", "A lesson nobody used.", "lesson")
    barely = remember("Barely used", "Retrieved once or twice only.", "lesson")
    often = remember("Often retrieved", "Run the linter before the tests.", "lesson")
    fact = remember("A used fact", "The office is in Lisbon.", "fact")  # used, but not a lesson
    more = [remember(f"Extra lesson {i}", f"Extra lesson number {i} about caching layer {i}.", "lesson") for i in range(5)]
    # A hand-written lesson holding a secret: the catalog scrubs it, and so does core memory.
    eng = Engine.open()
    eng.catalog.refresh()
    meta = dict(next(e for e in eng.catalog.memories() if e.id == shared["id"]).meta,
                id="mem-secret00000000000000000000", title="Deploy token", memory_key="lesson/deploy-token")
    meta.pop("content_hash", None)
    (vault_path / "Memory" / "Distillations" / "Agent Memory" / "secret.md").write_text(
        render(meta, "Deploy with token sk-proj-abcdefghijklmnopqrstuvwxyz0123 on the CI box.\n"))
    for _ in range(9):
        record_usage(state, [theirs["id"]], "final-answer", agent="codex")
    for n in range(3):
        record_usage(state, [shared["id"], fact["id"]] + (["mem-secret00000000000000000000"] if n else []),
                     "final-answer")
    record_usage(state, [mine["id"]], "final-answer", agent="claude-code")
    for _ in range(USED_MIN_RETRIEVED):
        record_usage(state, [often["id"]], "retrieved")
    for _ in range(USED_MIN_RETRIEVED - 1):
        record_usage(state, [barely["id"]], "retrieved")
    for i, m in enumerate(more):
        for _ in range(USED_MIN_RETRIEVED + 1 + i):
            record_usage(state, [m["id"]], "retrieved")

    items = core_items(Engine.open(agent_id="claude-code"), "claude-code")
    used = [i for i in items if i["section"] == "used-lesson"]
    ids = [i["id"] for i in used]
    assert len(used) == USED_LESSONS
    # Final-answer use first (most first), then retrieval; never codex's private lesson, never a fact.
    assert ids[:3] == [shared["id"], "mem-secret00000000000000000000", mine["id"]]
    assert ids[3:] == [more[4]["id"], more[3]["id"]]
    assert theirs["id"] not in ids and fact["id"] not in ids and unused["id"] not in ids and barely["id"] not in ids
    assert used[0]["uses"] == {"finalAnswer": 3, "retrieved": 0} and used[0]["type"] == "lesson"
    # The agent's own used lesson is not repeated under its private lessons.
    assert [i["id"] for i in items if i["section"] == "lesson"] == []
    text = core_text(Engine.open(agent_id="claude-code"), "claude-code")
    assert "## Lessons answers keep using" in text and "Pin the Docker base image" in text
    assert "sk-proj-abcdefghijklmnop" not in text and "Deploy with token" in text
    assert "codex sandbox" not in text
    # The owner reads the shared layer only: no agent's private lesson.
    owner = [i["id"] for i in core_items(Engine.open(), None) if i["section"] == "used-lesson"]
    assert mine["id"] not in owner and theirs["id"] not in owner and owner[0] == shared["id"]
    # Codex sees its own lesson first.
    codex = [i["id"] for i in core_items(Engine.open(agent_id="codex"), "codex") if i["section"] == "used-lesson"]
    assert codex[0] == theirs["id"] and mine["id"] not in codex


def test_a_core_note_over_3000_characters_is_flagged(vault_path):
    """DESIGN keeps Core Memory under about 3,000 characters; a longer one was never flagged."""
    core = vault_path / "Memory" / "Core Memory.md"
    core.write_text("# Core Memory\n\n" + "- Always run the linters before pushing a branch.\n" * 20, encoding="utf-8")
    assert run("core")["warnings"] == [] and run("health")["warnings"] == []
    assert not [w for w in run("doctor")["warnings"] if "Core Memory" in w]
    core.write_text("# Core Memory\n\n" + "- Always run the linters before pushing a branch.\n" * 80, encoding="utf-8")
    # doctor, the command that lists what to fix, said nothing of it; none said by how much.
    for res in (run("core"), run("health"), run("doctor")):
        flagged = [w for w in res["warnings"] if w.startswith("Memory/Core Memory.md is 4,0")]
        assert len(flagged) == 1 and "3,000" in flagged[0] and "1,0" in flagged[0] and " over" in flagged[0], res["warnings"]


def test_a_kept_core_pack_follows_writes_hand_edits_and_lesson_use(vault_path, monkeypatch):
    """A long-lived process (the server) keeps each finished pack while what it is derived from is
    unchanged (at 10k notes deriving one is ~2,400 rows parsed and ~800 candidates fitted, 60-80 ms),
    and never answers from a stale one: a write through the server, a hand edit and answers that make
    a lesson one "answers keep using" each change the next `core`; a write of another type does not
    derive it again."""
    import json
    import time

    from hive_brain.config import resolve
    from hive_brain.daemon.server import Server
    from hive_brain.memory import core
    from hive_brain.memory.core import USED_MIN_RETRIEVED

    monkeypatch.setenv("HIVE_BRAIN_SEMANTIC", "0")
    db = remember("Database", "We chose Postgres over MySQL.", "decision")
    remember("Flaky tests", "Retry the quokka suite once before calling a test flaky.", "lesson")
    derived = [0]
    items = core.core_items

    def counted(*a, **k):
        derived[0] += 1
        return items(*a, **k)

    monkeypatch.setattr(core, "core_items", counted)

    with Server(resolve(), log_to_stderr=False, resync=3600.0) as srv:
        assert srv.wait_ready(30)

        def ask(name: str, **args) -> dict:
            _, resp = srv.handle(json.dumps({"op": name, "args": args}).encode())
            assert resp["ok"], resp
            return resp["result"]

        first = ask("core")
        assert "Postgres" in first["text"] and "quokka" not in first["text"]
        n = derived[0]
        assert ask("core") == first and derived[0] == n  # kept: nothing it reads changed
        assert ask("core", budget=3000)["budget"] == 3000 and derived[0] == n + 1  # its own pack

        ask("write", op="remember", agent=None, lock_timeout=5,
            args={"inp": {"type": "fact", "title": "Office", "content": "The office is in Lisbon."}})
        assert ask("core") == first and derived[0] == n + 1  # a fact is no input of core memory
        ask("write", op="remember", agent=None, lock_timeout=5,
            args={"inp": {"type": "decision", "title": "Queue", "content": "We chose Kafka for the event bus."}})
        assert "Kafka" in ask("core")["text"]

        note = vault_path / db["path"]
        note.write_text(note.read_text().replace("Postgres", "CockroachDB"), encoding="utf-8")
        deadline = time.monotonic() + 10
        while "CockroachDB" not in (text := ask("core")["text"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "CockroachDB" in text and "Postgres" not in text

        eng = Engine.open()
        for _ in range(USED_MIN_RETRIEVED):
            assert eng.answer("quokka suite flaky test retry")["items"]
        text = ask("core")["text"]
        assert "## Lessons answers keep using" in text and "quokka" in text

        (vault_path / "Memory" / "Core Memory.md").write_text(CORE)  # read from disk: its stat is a mark
        assert "Ana, SRE" in ask("core")["text"]
