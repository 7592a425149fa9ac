"""Memory layers and agent identity on real tantivy (and LanceDB + the real ONNX pack where marked):
isolation, the needle among 10k other agents' memories, enforcement, private overrides, conflicts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.engine import Engine
from hive_brain.errors import InvalidAgentId, Refused
from hive_brain.memory.layers import apply_overrides
from hive_brain.memory.model import MemoryInput
from hive_brain.store.notes import render

from .helpers import cli_as

SAME = "Deployments to the staging cluster need the blue-green switch flipped by hand after migrations."
SHARED_DIR = "Memory/Distillations/Agent Memory/"


def _engine(monkeypatch, agent: str | None) -> Engine:
    if agent is None:
        monkeypatch.delenv("HIVE_AGENT_ID", raising=False)
    else:
        monkeypatch.setenv("HIVE_AGENT_ID", agent)
    return Engine.open()


def cli(*args: str, agent: str | None = None, enforce: bool = False, ok: bool = True) -> Any:
    return cli_as(*args, agent=agent, enforce=enforce, ok=ok)


def _three_layers(monkeypatch) -> dict[str, str]:
    """Identical text in shared, a's private and b's private memory; returns layer -> path."""
    paths = {}
    # Agents first: a private write checks duplicates only against what that agent can read.
    for who in ("a", "b", None):
        r = _engine(monkeypatch, who).memory.remember(
            MemoryInput(type="lesson", title="Staging deploys", content=SAME)
        )
        paths[who or "shared"] = r["path"]
    return paths


def _hit_paths(res: dict) -> set[str]:
    return {h["path"] for h in res["hits"]}


def test_isolation_lexical_identical_text_in_three_layers(vault_path, monkeypatch):
    p = _three_layers(monkeypatch)
    assert (
        p["shared"].startswith(SHARED_DIR)
        and p["a"].startswith("Agents/a/")
        and p["b"].startswith("Agents/b/")
    )
    q = "staging cluster blue-green switch after migrations"
    got_a = _hit_paths(_engine(monkeypatch, "a").recall(q, semantic=False, scope="agent-memory"))
    got_b = _hit_paths(_engine(monkeypatch, "b").recall(q, semantic=False, scope="agent-memory"))
    got_owner = _hit_paths(_engine(monkeypatch, None).recall(q, semantic=False, scope="full-vault"))
    assert got_a == {p["shared"], p["a"]}
    assert got_b == {p["shared"], p["b"]}
    assert got_owner == {p["shared"]}  # the owner reads no private memory
    # Full-vault recall with operational notes widens kinds, never layers.
    got_a_full = _hit_paths(
        _engine(monkeypatch, "a").recall(q, semantic=False, scope="full-vault", include_operational=True)
    )
    assert p["b"] not in got_a_full


def test_empty_or_malformed_agent_id_is_rejected(vault_path, monkeypatch):
    for bad in ("  ", "", "../b", "a b"):
        monkeypatch.setenv("HIVE_AGENT_ID", bad)
        with pytest.raises(InvalidAgentId):
            Engine.open()
        res = CliRunner().invoke(main, ["recall", "staging deploys", "--json"], catch_exceptions=False)
        assert res.exit_code == 2 and json.loads(res.output)["error"] == "InvalidAgentId"


@pytest.mark.slow
def test_isolation_vector_path(vault_path, monkeypatch, with_model):
    from hive_brain.search.recall import build_where

    p = _three_layers(monkeypatch)
    eng = _engine(monkeypatch, "a")
    eng.rebuild()
    view = eng.view()
    assert view.vectors is not None
    vec = view.embedder.embed_queries(["how do we ship to the test environment"])[0]
    for agent, want in (("a", {p["shared"], p["a"]}), ("b", {p["shared"], p["b"]}), (None, {p["shared"]})):
        hits = view.vectors.search(vec, where=build_where(agent=agent, kinds=("memory",)), limit=50)
        assert {h.note_path for h in hits} == want, agent
    # A paraphrase with no shared content word: only the vector path can find it.
    res = eng.recall("how do we ship to the test environment", scope="agent-memory", abstain=False)
    assert res["semantic"] and _hit_paths(res) <= {p["shared"], p["a"]} and _hit_paths(res)
    res_b = _engine(monkeypatch, "b").recall(
        "how do we ship to the test environment", scope="agent-memory", abstain=False
    )
    assert p["a"] not in _hit_paths(res_b) and _hit_paths(res_b)


def _note(mid: str, agent: str, title: str, body: str) -> str:
    meta = {
        "id": mid,
        "type": "lesson",
        "title": title,
        "memory_key": f"lesson/{mid}",
        "layer": "private",
        "agent": agent,
        "status": "active",
        "origin": "agent",
        "created": "2025-01-01T00:00:00Z",
        "updated": "2025-01-01T00:00:00Z",
    }
    return render(meta, body)


def test_needle_small_agent_among_10k_other_agents_memories(vault_path, monkeypatch):
    from hive_brain.index.predicates import Eq

    words = "flaky integration tests retry the websocket reconnect timeout in the payments service"
    filler = (
        "We looked at this during the incident review on Thursday and wrote down what we saw, "
        "who was on call, which dashboards helped, and what we would check first next time "
        "before paging anyone else again."
    )
    for i in range(10_000):
        agent = f"other-{i % 50:02d}"
        d = vault_path / "Agents" / agent / "Memory"
        d.mkdir(parents=True, exist_ok=True)
        # Short notes that are nothing but the query words: they outrank the needles on plain BM25.
        (d / f"lesson-{i:05d}.md").write_text(
            _note(f"mem-other{i:05d}", agent, f"Payments websocket reconnect timeout {i}", f"{words} {i}.")
        )
    eng = _engine(monkeypatch, None)
    built = eng.rebuild(embed=False)
    assert built["indexed"] >= 10_000
    small = _engine(monkeypatch, "small")
    needles = {
        small.memory.remember(MemoryInput(type="lesson", title=t, content=c))["path"]
        for t, c in (
            ("Raise the limit", f"{filler} {words}: raise it to 30 s."),
            ("Hidden race", f"{filler} {words}: it hides a real race; fix the lock."),
            ("Cap attempts", f"{filler} {words}: cap at two attempts in CI."),
        )
    }
    # Filtering after a top-k cut would lose them: unfiltered, they are not even in the candidate list.
    view = small.view(semantic=False)
    unfiltered = {h.note_path for h in view.lexical.search(words, where=Eq("kind", "memory"), limit=120)}
    assert not unfiltered & needles
    res = small.recall(words, semantic=False, scope="agent-memory", limit=3, view=view)
    assert _hit_paths(res) == needles, res["hits"]
    # Another agent with the same words never sees them.
    other = _engine(monkeypatch, "other-07").recall(words, semantic=False, scope="agent-memory", limit=10)
    assert not _hit_paths(other) & needles and all(
        p.startswith("Agents/other-07/") for p in _hit_paths(other)
    )


# ---------------------------------------------------------------------------------------------- enforcement
def test_enforcement_agent_cannot_change_others_or_shared(vault_path):
    shared = cli("remember", "--type", "fact", "--title", "CI", "--content", "CI runs on GitHub Actions.")
    b_mem = cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "B lesson",
        "--content",
        "b's own lesson about caches.",
        agent="b",
        enforce=True,
    )
    assert b_mem["layer"] == "private"
    before = {r["path"]: (vault_path / r["path"]).read_bytes() for r in (shared, b_mem)}
    for target in (shared["id"], b_mem["id"]):
        for args in (
            ("update", "--memory-id", target, "--content", "changed by a"),
            ("evolve", "--memory-id", target, "--content", "evolved by a"),
            ("delete", "--memory-id", target, "--confirm"),
        ):
            res = cli(*args, agent="a", enforce=True, ok=False)
            assert res["_exit"] == 1 and res["error"] in ("PermissionDenied", "NotFound"), res
    for path, data in before.items():
        assert (vault_path / path).read_bytes() == data
    # Its own memory it may change.
    own = cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "A lesson",
        "--content",
        "a's lesson.",
        agent="a",
        enforce=True,
    )
    cli("update", "--memory-id", own["id"], "--tags", "x", agent="a", enforce=True)
    # Maintenance on shared memory is the owner's: an enforced agent's delete names it.
    res = cli("delete", "--memory-id", shared["id"], "--confirm", agent="a", enforce=True, ok=False)
    assert res["error"] == "PermissionDenied" and "owner" in res["message"]


def test_private_write_duplicate_check_stays_in_visible_layers(vault_path, monkeypatch):
    """The owner writing what an agent keeps privately is no duplicate, and names no private note."""
    a = _engine(monkeypatch, "a").memory.remember(
        MemoryInput(type="fact", title="X", content="Same text here.")
    )
    r = _engine(monkeypatch, None).memory.remember(
        MemoryInput(type="fact", title="X", content="Same text here.")
    )
    assert r["layer"] == "shared" and a["path"] not in json.dumps(r)
    # ...but an agent's private copy of what shared memory says is one.
    with pytest.raises(Refused):
        _engine(monkeypatch, "b").memory.remember(
            MemoryInput(type="fact", title="Y", content="Same text here.")
        )


# ---------------------------------------------------------------------------------------------- overrides
def test_private_override_seen_by_its_agent_only(vault_path, monkeypatch):
    ci = cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "CI Node version",
        "--content",
        "The CI workflow matrix runs the test suite on Node 18.",
    )
    ov = cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "CI Node version for my fork",
        "--overrides",
        ci["id"],
        "--content",
        "In my fork CI uses Node 22 because of fetch.",
        agent="a",
    )
    assert ov["layer"] == "private"
    q = "which Node version does the CI workflow matrix run"

    def recall_as(agent: str | None) -> list[dict]:
        eng = _engine(monkeypatch, agent)
        hits, conflicts = apply_overrides(
            eng.recall(q, semantic=False, scope="agent-memory")["hits"], eng.catalog, agent
        )
        assert conflicts == []
        return hits

    a_hits = recall_as("a")
    ids = [h["id"] for h in a_hits]
    assert ci["id"] not in ids and ids[0] == ov["id"] and a_hits[0]["overrides"] == ci["id"]
    for other in ("b", None):
        ids = [h["id"] for h in recall_as(other)]
        assert ci["id"] in ids and ov["id"] not in ids
    # Idempotent: applying again changes nothing.
    eng = _engine(monkeypatch, "a")
    again, _ = apply_overrides(a_hits, eng.catalog, "a")
    assert [h["id"] for h in again] == [h["id"] for h in a_hits]
    # A query only the shared memory matches still gives agent a its own version, in the same slot.
    hits, _ = apply_overrides(
        eng.recall("workflow matrix test suite", semantic=False, scope="agent-memory")["hits"],
        eng.catalog,
        "a",
    )
    assert hits[0]["id"] == ov["id"] and "Node 22" in hits[0]["passage"]["text"]
    assert hits[0]["overrides"] == ci["id"] and hits[0]["scoreDetails"]["substitutedFor"] == ci["id"]
    # A replayed view passes the text as it indexed it.
    # (recall already applies overrides for its caller, so take the owner's un-overridden hits)
    shared_hits = _engine(monkeypatch, None).recall("workflow matrix test suite", semantic=False, scope="agent-memory")["hits"]
    eng = _engine(monkeypatch, "a")
    hits, _ = apply_overrides(shared_hits, eng.catalog, "a", full_text=lambda path: "as indexed then")
    assert hits[0]["passage"]["text"] == "as indexed then"
    # One override per shared memory per agent: the second is refused.
    res = cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "Another",
        "--overrides",
        ci["id"],
        "--content",
        "Node 20.",
        agent="a",
        ok=False,
    )
    assert res["error"] == "Refused" and ov["id"] in res["message"]


def test_override_of_user_preference_refused_and_hand_written_one_is_a_conflict(vault_path, monkeypatch):
    pref = cli(
        "remember",
        "--type",
        "preference",
        "--title",
        "Indentation",
        "--content",
        "Use tabs for indentation in Go files.",
    )
    res = cli(
        "remember",
        "--type",
        "preference",
        "--title",
        "My indentation",
        "--overrides",
        pref["id"],
        "--content",
        "Use four spaces in Go files.",
        agent="a",
        ok=False,
    )
    assert res["_exit"] == 1 and res["error"] == "Refused" and "origin: user" in res["message"]
    assert not (vault_path / "Agents/a/Memory").exists() or not list(
        (vault_path / "Agents/a/Memory").glob("*.md")
    )
    # Overrides need an agent, and name a shared memory.
    assert (
        cli(
            "remember",
            "--type",
            "fact",
            "--title",
            "t",
            "--content",
            "c",
            "--overrides",
            pref["id"],
            ok=False,
        )["_exit"]
        == 2
    )
    assert (
        cli(
            "remember",
            "--type",
            "fact",
            "--title",
            "t",
            "--content",
            "c",
            "--overrides",
            "mem-nope",
            agent="a",
            ok=False,
        )["error"]
        == "NotFound"
    )
    # Hand-written anyway (e.g. in Obsidian): reported as a conflict, not applied.
    d = vault_path / "Agents/a/Memory"
    d.mkdir(parents=True, exist_ok=True)
    meta = {
        "id": "mem-handwritten1",
        "type": "preference",
        "title": "My indentation",
        "layer": "private",
        "agent": "a",
        "status": "active",
        "overrides": pref["id"],
        "origin": "agent",
    }
    (d / "my-indentation.md").write_text(render(meta, "Use four spaces for indentation in Go files."))
    found = cli("conflicts")
    assert isinstance(found, list) and len(found) == 1
    assert found[0]["private"] == "mem-handwritten1" and found[0]["shared"] == pref["id"]
    assert cli("conflicts", agent="b") == []
    eng = _engine(monkeypatch, "a")
    hits, conflicts = apply_overrides(
        eng.recall("indentation in Go files", semantic=False)["hits"], eng.catalog, "a"
    )
    ids = [h["id"] for h in hits]
    assert pref["id"] in ids and conflicts and conflicts[0]["shared"] == pref["id"]
    assert next(h for h in hits if h["id"] == pref["id"])["conflict"]["private"] == "mem-handwritten1"
    human = CliRunner().invoke(main, ["conflicts"], catch_exceptions=False)
    assert human.exit_code == 0 and "mem-handwritten1" in human.output
