"""Brain Review: an agent's shared write becomes a proposal the owner approves and applies; promotions
of what several agents learned alike; health. Real tantivy for recall."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_brain.cli.app import main
from hive_brain.store.journal import STEPS
from hive_brain.store.notes import parse_text, render

from .helpers import cli_as

REVIEW = "Operations/Brain Review"


def cli(*args: str, agent: str | None = None, enforce: bool = True, ok: bool = True) -> Any:
    return cli_as(*args, agent=agent, enforce=enforce, ok=ok)


def _meta(vault: Path, rel: str) -> dict:
    return parse_text(rel, (vault / rel).read_text()).meta


def _recall_ids(q: str, agent: str | None) -> list[str]:
    res = cli("recall", q, "--lexical", "--scope", "agent-memory", agent=agent)
    return [h["id"] for h in res["hits"]]


def test_agent_shared_write_is_proposed_then_owner_approves_and_applies(vault_path):
    content = "Run database migrations before deploying the API, never after."
    prop = cli(
        "remember",
        "--type",
        "procedure",
        "--title",
        "Migrations before deploy",
        "--content",
        content,
        "--memory-scope",
        "hive",
        "--tags",
        "deploy",
        agent="a",
    )
    assert prop["status"] == "proposed" and prop["proposal"].startswith("rev-")
    assert prop["path"].startswith(REVIEW + "/")
    m = _meta(vault_path, prop["path"])
    assert m["kind"] == "remember" and m["status"] == "pending" and m["proposed_by"] == "a"
    assert m["type"] == "procedure" and m["title"] == "Migrations before deploy" and m["tags"] == ["deploy"]
    assert m["memory_key"] == "procedure/migrations-before-deploy" and m["created"]
    assert parse_text(prop["path"], (vault_path / prop["path"]).read_text()).body.strip() == content
    # Nothing reached shared memory, and nobody recalls it yet (proposals are not memory).
    assert not list((vault_path / "Memory/Distillations/Agent Memory").glob("*.md"))
    assert prop["proposal"] not in json.dumps(
        cli("recall", "migrations before deploying", "--lexical", agent="b")
    )
    # Asking again does not queue a second proposal.
    again = cli(
        "remember",
        "--type",
        "procedure",
        "--title",
        "Migrations before deploy",
        "--content",
        content,
        "--memory-scope",
        "hive",
        agent="a",
    )
    assert again["proposal"] == prop["proposal"] and again["already"]
    # The proposer sees its proposal; another agent does not; no agent decides.
    assert [p["id"] for p in cli("review", "list", agent="a")] == [prop["proposal"]]
    assert cli("review", "list", agent="b") == []
    assert cli("review", "show", prop["proposal"], agent="b", ok=False)["error"] == "NotFound"
    for verb in ("approve", "reject", "apply"):
        res = cli("review", verb, prop["proposal"], agent="a", ok=False)
        assert res["error"] == "PermissionDenied" and "owner" in res["message"]
    # Even without enforcement, an agent does not decide reviews.
    assert (
        cli("review", "approve", prop["proposal"], agent="a", enforce=False, ok=False)["error"]
        == "PermissionDenied"
    )
    # The owner: apply needs approval first.
    assert cli("review", "apply", prop["proposal"], ok=False)["error"] == "Refused"
    shown = cli("review", "show", prop["proposal"])
    assert shown["content"] == content and shown["status"] == "pending"
    assert cli("review", "approve", prop["proposal"])["status"] == "approved"
    applied = cli("review", "apply", prop["proposal"])
    assert applied["status"] == "applied" and applied["layer"] == "shared"
    mem = cli("get", "--memory-id", applied["id"])
    assert mem["path"].startswith("Memory/Distillations/Agent Memory/") and mem["content"] == content
    assert mem["meta"]["origin"] == "agent-reviewed" and mem["meta"]["review"] == prop["proposal"]
    assert mem["meta"]["proposed_by"] == "a" and mem["meta"]["layer"] == "shared"
    pm = _meta(vault_path, prop["path"])
    assert pm["status"] == "applied" and pm["applied_memory"] == applied["id"]
    assert cli("review", "list", "--status", "applied")[0]["id"] == prop["proposal"]
    # Now every agent (and the owner) recalls it.
    for who in ("a", "b", "c", None):
        assert applied["id"] in _recall_ids("migrations before deploying the API", who), who
    # An applied proposal is done.
    assert cli("review", "apply", prop["proposal"], ok=False)["error"] == "Refused"
    assert cli("review", "reject", prop["proposal"], ok=False)["error"] == "Refused"


def test_reject_and_evolve_proposals(vault_path):
    old = cli("remember", "--type", "fact", "--title", "Python version", "--content", "We use Python 3.11.")
    # Same key as a shared memory: the proposal is to evolve it.
    prop = cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "Python version",
        "--content",
        "We use Python 3.12 now.",
        "--memory-scope",
        "hive",
        agent="a",
    )
    assert prop["evolves"] == old["id"]
    other = cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "Linter",
        "--content",
        "We lint with pylint.",
        "--memory-scope",
        "hive",
        agent="b",
    )
    rej = cli("review", "reject", other["proposal"], "--reason", "we use ruff")
    assert (
        rej["status"] == "rejected" and _meta(vault_path, other["path"])["decision_reason"] == "we use ruff"
    )
    assert cli("review", "apply", other["proposal"], ok=False)["error"] == "Refused"
    res = cli("review", "approve", prop["proposal"], "--apply")
    assert res["status"] == "applied" and res["supersedes"] == old["id"]
    assert cli("get", "--memory-id", old["id"])["meta"]["status"] == "superseded"
    assert cli("get", "--memory-id", res["id"])["meta"]["supersedes"] == old["id"]
    # Identical content already in shared memory is nothing to propose.
    dup = cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "Py",
        "--content",
        "We use Python 3.12 now.",
        "--memory-scope",
        "hive",
        agent="c",
        ok=False,
    )
    assert dup["error"] == "DuplicateContent"
    assert {p["status"] for p in cli("review", "list")} == {"applied", "rejected"}
    human = CliRunner().invoke(main, ["review", "list"], catch_exceptions=False)
    assert human.exit_code == 0 and prop["proposal"] in human.output


def test_owner_edit_in_obsidian_is_what_gets_applied(vault_path):
    prop = cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "Flaky test",
        "--content",
        "test_sync is flaky.",
        "--memory-scope",
        "hive",
        agent="a",
    )
    p = vault_path / prop["path"]
    p.write_text(
        p.read_text().replace("test_sync is flaky.", "test_sync is flaky under load; rerun it once.")
    )
    cli("review", "approve", prop["proposal"])
    res = cli("review", "apply", prop["proposal"])
    assert cli("get", "--memory-id", res["id"])["content"] == "test_sync is flaky under load; rerun it once."


def test_batch_hive_records_become_proposals(vault_path, tmp_path):
    f = tmp_path / "b.json"
    f.write_text(
        json.dumps(
            [
                {"type": "fact", "title": "Mine", "content": "A private fact."},
                {"type": "fact", "title": "Hive", "content": "A fact for everyone.", "memory_scope": "hive"},
            ]
        )
    )
    res = cli("batch", "--file", str(f), agent="a")
    assert res["count"] == 1 and res["proposed"] == 1
    assert [r["status"] for r in res["records"]] == ["ok", "proposed"]
    assert len(cli("review", "list", "--status", "pending")) == 1


APPLY = """
import sys
from hive_brain.engine import Engine
from hive_brain.memory.review import BrainReview
BrainReview(Engine.open().memory).apply(sys.argv[1])
"""


@pytest.mark.parametrize("step", STEPS)
def test_apply_killed_at_every_step_is_all_or_nothing(vault_path, step):
    prop = cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "Cache",
        "--content",
        "Redis is the cache.",
        "--memory-scope",
        "hive",
        agent="a",
    )
    cli("review", "approve", prop["proposal"])
    env = {k: v for k, v in os.environ.items() if k != "HIVE_AGENT_ID"}
    proc = subprocess.run(
        [sys.executable, "-c", APPLY, prop["proposal"]],
        env={**env, "HIVE_BRAIN_CRASH_AT": step},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert cli("doctor")["problems"] == []
    mems = list((vault_path / "Memory/Distillations/Agent Memory").glob("*.md"))
    status = _meta(vault_path, prop["path"])["status"]
    assert (len(mems), status) in ((0, "approved"), (1, "applied"))
    if status == "approved":  # rolled back: applying again works
        cli("review", "apply", prop["proposal"])
        assert len(list((vault_path / "Memory/Distillations/Agent Memory").glob("*.md"))) == 1


# ---------------------------------------------------------------------------------------------- promotion
def test_promotion_groups_near_duplicates_of_two_agents_once(vault_path):
    a = cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "Flaky websocket test",
        "--content",
        "The websocket integration test is flaky on CI; raise the reconnect timeout to 30 seconds.",
        agent="a",
    )
    b = cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "Websocket test flaky",
        "--content",
        "Websocket integration test flaky in CI: raise reconnect timeout to 30 seconds.",
        agent="b",
    )
    cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "Unrelated",
        "--content",
        "Docker builds need buildkit enabled.",
        agent="c",
    )
    cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "Same agent twice",
        "--content",
        "Docker builds need buildkit enabled, always.",
        agent="c",
    )
    # Promotion reads every agent's private memory: never an agent's to run.
    assert cli("promote", agent="a", enforce=False, ok=False)["error"] == "PermissionDenied"
    dry = cli("promote", "--dry-run")
    assert len(dry["proposed"]) == 1 and cli("review", "list") == []
    first = cli("promote")
    assert len(first["proposed"]) == 1
    p = first["proposed"][0]
    assert set(p["sources"]) == {a["id"], b["id"]} and p["agents"] == ["a", "b"]
    m = _meta(vault_path, p["path"])
    assert m["kind"] == "promotion" and m["status"] == "pending" and m["type"] == "lesson"
    assert (
        set(m["sources"]) == {a["id"], b["id"]} and m["source_agents"] == ["a", "b"] and "a, b" in m["reason"]
    )
    # Idempotent.
    second = cli("promote")
    assert second["proposed"] == [] and len(second["skipped"]) == 1
    assert len(cli("review", "list")) == 1
    # Agents see no promotion (it quotes other agents' private memories).
    assert cli("review", "list", agent="a") == []
    # A third agent joining extends the pending proposal instead of adding one.
    c2 = cli(
        "remember",
        "--type",
        "lesson",
        "--title",
        "Websocket flaky",
        "--content",
        "The websocket integration test is flaky in CI; raise reconnect timeout to 30 seconds!",
        agent="d",
    )
    third = cli("promote")
    assert third["extended"] == [p["proposal"]] and third["proposed"] == []
    assert c2["id"] in _meta(vault_path, p["path"])["sources"]
    # Applied: it is shared now, and asking again proposes nothing.
    cli("review", "approve", p["proposal"], "--apply")
    assert cli("promote")["proposed"] == []
    assert len(cli("review", "list")) == 1


def test_promotion_by_same_memory_key(vault_path):
    cli(
        "remember",
        "--type",
        "decision",
        "--title",
        "Queue",
        "--memory-key",
        "decision/queue",
        "--content",
        "Use SQS for background jobs.",
        agent="a",
    )
    cli(
        "remember",
        "--type",
        "decision",
        "--title",
        "Queue choice",
        "--memory-key",
        "decision/queue",
        "--content",
        "Background jobs go through SQS, not Celery.",
        agent="b",
    )
    res = cli("promote")
    assert len(res["proposed"]) == 1 and "same memory_key" in res["proposed"][0]["basis"]


# ---------------------------------------------------------------------------------------------- health
def test_health_counts_layers_queue_conflicts_and_freshness(vault_path):
    pref = cli("remember", "--type", "preference", "--title", "Tabs", "--content", "Tabs in Go files.")
    cli("remember", "--type", "fact", "--title", "A fact", "--content", "Agent a knows this.", agent="a")
    cli("remember", "--type", "fact", "--title", "B fact", "--content", "Agent b knows this.", agent="b")
    cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "Task fact",
        "--content",
        "For task t1.",
        "--task",
        "t1",
        agent="b",
    )
    cli(
        "remember",
        "--type",
        "fact",
        "--title",
        "Hive",
        "--content",
        "For the hive.",
        "--memory-scope",
        "hive",
        agent="a",
    )
    d = vault_path / "Agents/a/Memory"
    meta = {
        "id": "mem-hand1",
        "type": "preference",
        "title": "Spaces",
        "status": "active",
        "overrides": pref["id"],
    }
    (d / "spaces.md").write_text(render(meta, "Spaces in Go files."))
    h = cli("health")
    assert h["memories"]["shared"] == 1 and h["memories"]["private"] == {"a": 2, "b": 1}
    assert h["memories"]["task"] == {"b": 1} and h["memories"]["total"] == 5
    assert h["proposals"]["pending"] == 1 and h["conflicts"] == 1
    assert h["index"]["staleNotes"] >= 1 and not h["index"]["fresh"]  # the hand-written note
    cli("recall", "spaces", "--lexical")  # a read catches the index up
    assert cli("health")["index"]["fresh"]
    # An enforced agent sees its own breakdown, the others only as a total.
    ha = cli("health", agent="a")
    assert ha["memories"]["private"] == {"a": 2, "(other agents)": 1} and ha["conflicts"] == 1
    human = CliRunner().invoke(main, ["health"], catch_exceptions=False)
    assert human.exit_code == 0 and "1 pending" in human.output


def test_review_show_of_a_pending_proposal_shows_it(vault_path):
    """A proposal waiting for the owner has status pending, which the CLI took for a write kept
    because the vault was busy: `review show` printed "Pending rev-...: the vault is busy"."""
    prop = cli("remember", "--type", "fact", "--title", "Shared CI", "--content", "CI runs on Buildkite.",
               "--memory-scope", "hive", agent="a")
    res = CliRunner().invoke(main, ["review", "show", prop["proposal"]], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "busy" not in res.output and "Shared CI" in res.output and "CI runs on Buildkite." in res.output


# ---------------------------------------------------------------------------------------------- evidence
def _transcript(path: Path, sid: str = "sess-teach-0001") -> Path:
    def entry(role: str, text: str, ts: str) -> dict:
        return {"type": role, "isSidechain": False, "sessionId": sid, "cwd": "/home/u/api", "timestamp": ts,
                "message": {"role": role, "content": [{"type": "text", "text": text}]}}

    rows = [entry("user", "Why did the deploy fail again?", "2026-03-01T10:00:00Z"),
            entry("assistant", "The deploy failed because the migrations had not run first.", "2026-03-01T10:00:05Z"),
            entry("user", "OK. Use key sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z for the registry.",
                  "2026-03-01T10:01:00Z"),
            entry("assistant", "Noted.", "2026-03-01T10:01:05Z")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _teach(*evidence: str, agent: str = "a", ok: bool = True) -> dict:
    return cli("remember", "--type", "lesson", "--title", "Migrations before deploy",
               "--content", "Deploys fail unless the migrations ran first.", "--memory-scope", "hive",
               *evidence, agent=agent, ok=ok)


def test_a_proposal_from_a_conversation_carries_its_evidence(vault_path, tmp_path):
    """"Teach the hive" from a conversation: the proposal names the conversation and quotes the turn it
    was learned in, in its note, `review show` (JSON and human) and the memory it becomes."""
    t = _transcript(tmp_path / "session.jsonl")
    prop = _teach("--from-conversation", str(t), "--excerpt", "the  migrations had not run")
    assert prop["status"] == "proposed", prop
    ev = _meta(vault_path, prop["path"])["evidence"]
    assert ev["transcript"] == str(t.resolve()) and ev["session_id"] == "sess-teach-0001" and ev["turn"] == 1
    assert ev["excerpt"] == "the migrations had not run"
    shown = cli("review", "show", prop["proposal"])
    assert shown["evidence"] == {"conversation": None, "sessionId": "sess-teach-0001", "transcript": str(t.resolve()),
                                 "turn": 1, "excerpt": "the migrations had not run"}
    assert cli("review", "list")[0]["evidence"]["turn"] == 1
    human = CliRunner().invoke(main, ["review", "show", prop["proposal"]], catch_exceptions=False).output
    assert "evidence:" in human and "turn 1" in human and "> the migrations had not run" in human, human
    applied = cli("review", "approve", prop["proposal"], "--apply")
    assert _meta(vault_path, applied["path"])["evidence"]["excerpt"] == "the migrations had not run"


def test_evidence_names_the_captured_conversation_note_and_quotes_a_turn(vault_path, tmp_path):
    from hive_brain.engine import Engine
    from hive_brain.memory.conversations import capture

    t = _transcript(tmp_path / "session.jsonl")
    note = capture(Engine.open(), t, agent="a")["path"]
    by_id = _teach("--from-conversation", "sess-teach-0001", "--turn", "1")
    ev = cli("review", "show", by_id["proposal"])["evidence"]
    assert ev["conversation"] == note and ev["turn"] == 1 and "migrations had not run" in ev["excerpt"], ev
    by_note = cli("remember", "--type", "fact", "--title", "Registry key lives in the vault",
                  "--content", "The registry key is kept in the secrets store.", "--memory-scope", "hive",
                  "--from-conversation", note, "--turn", "2", agent="a")
    ev2 = cli("review", "show", by_note["proposal"])["evidence"]
    assert ev2["conversation"] == note and ev2["turn"] == 2
    assert "sk-proj-" not in json.dumps(ev2) and "registry" in ev2["excerpt"]  # quoted redacted


def test_evidence_that_is_not_in_the_conversation_is_refused(vault_path, tmp_path):
    t = _transcript(tmp_path / "session.jsonl")
    bad = _teach("--from-conversation", str(t), "--excerpt", "we always deploy on Fridays", ok=False)
    assert bad["error"] == "UsageError" and "not in that conversation" in bad["message"], bad
    assert _teach("--from-conversation", str(t), "--turn", "9", ok=False)["error"] == "UsageError"
    assert _teach("--from-conversation", "no-such-session", ok=False)["error"] == "UsageError"
    assert _teach("--excerpt", "the migrations", ok=False)["error"] == "UsageError"
    assert not list((vault_path / REVIEW).glob("*.md"))  # nothing was proposed


_WORDS = st.frozensets(st.sampled_from([f"w{i}" for i in range(12)]), max_size=9)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), _WORDS), max_size=14), st.sampled_from([0.5, 0.6, 0.75, 1.0]))
def test_the_promotion_pass_pair_search_finds_every_pair_all_pairs_would(sets, threshold):
    """The prefix filter with its size bisect and per-agent index is exact: the pairs it finds are all
    pairs of two agents' word sets at Jaccard >= threshold, no more (small vocabularies make many
    ties at the threshold and sets of equal size)."""
    from hive_brain.memory.review import _jaccard, similar_pairs

    words = {f"m{i}": w for i, (_, w) in enumerate(sets)}
    agent_of = {f"m{i}": a for i, (a, _) in enumerate(sets)}
    found = {frozenset(p) for p in similar_pairs(words, agent_of, threshold)}
    want = {
        frozenset((x, y))
        for x in words
        for y in words
        if x < y and agent_of[x] != agent_of[y] and _jaccard(words[x], words[y]) >= threshold
    }
    assert found == want
