"""Operational events and usage: the bounded journal under concurrent writers, record-operation and its
alias, secrets refused, recall --include-operational, mine-patterns (rules, labelled log, --enqueue),
record-usage."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pytest

from hive_brain.store import oplog
from hive_brain.store.oplog import EventLog
from tests.helpers import cli_as, remember, run
from tests.test_json_casing import snake_keys

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.operations import append_concurrently, check_log, synthetic_log  # noqa: E402


def _op(title: str, op: str, task: str, outcome: str = "success", *extra: str, agent: str | None = None,
        ok: bool = True) -> dict:
    return cli_as("record-operation", "--title", title, "--content", f"{title}.", "--operation-key", op,
                  "--outcome", outcome, "--task-id", task, *extra, agent=agent, ok=ok)


def _journal(vault_path: Path) -> EventLog:
    from hive_brain.config import resolve
    from hive_brain.memory.operations import operation_log
    from hive_brain.store.vault import open_vault

    return operation_log(open_vault(resolve(vault=str(vault_path))).state)


# ------------------------------------------------------------------------------------------- journal
def test_eight_processes_through_rotation_keep_exactly_the_newest_events(tmp_path):
    """8 processes x 500 events of ~250 B (~1 MB) through a 128 KB limit: several rotations."""
    path = tmp_path / "operational-events.jsonl"
    res = append_concurrently(path, writers=8, per_writer=500, max_bytes=128 * 1024, pad=200)
    assert not res["errors"], res["errors"]
    assert sorted(res["files"]) == [path.name, path.name + ".1"], res
    assert res["stray_files"] == []
    assert res["within_limit"] and all(s <= 128 * 1024 for s in res["files"].values())
    assert res["invalid_lines"] == 0  # every line valid JSON, none torn
    assert res["each_writer_kept_its_newest"], "an event was lost or reordered at a rotation"
    assert res["rotated_only_when_full"]
    assert res["kept"] < res["written"]  # the run did age events out
    assert res["ok"]


def test_rotation_is_one_file_and_exact(tmp_path, monkeypatch):
    monkeypatch.setattr(oplog, "MAX_BYTES", 1000)
    (tmp_path / "j").mkdir()
    log = EventLog(tmp_path / "j" / "e.jsonl")
    sizes = [log.append({"n": i, "pad": "x" * 80}) for i in range(40)]
    assert {p.name for p in (tmp_path / "j").iterdir()} == {"e.jsonl", "e.jsonl.1", "e.jsonl.lock"}
    assert all(p.stat().st_size <= 1000 for p in log.files())
    kept = [r["n"] for r in log.read()]
    assert kept == list(range(40 - len(kept), 40))  # oldest first, only the oldest aged out
    assert log.rotated.stat().st_size + sizes[0] > 1000  # .1 was filled before it rotated
    chk = check_log(log.path, max_bytes=1000, writers=0, per_writer=0)
    assert chk["within_limit"] and chk["stray_files"] == []


def test_an_oversized_event_is_refused_with_what_to_do(tmp_path):
    from hive_brain.errors import UsageError

    log = EventLog(tmp_path / "e.jsonl")
    with pytest.raises(UsageError, match="cap of one record"):
        log.append({"content": "x" * (oplog.MAX_RECORD_BYTES + 1)})
    assert not log.path.exists()


# ---------------------------------------------------------------------------------- record-operation
def _notes(vault_path: Path) -> set[str]:
    return {str(p.relative_to(vault_path)) for p in vault_path.rglob("*.md")}


def test_record_operation_and_alias_write_no_memory(vault_path):
    before = _notes(vault_path)
    a = _op("Deploy failed: migration lock", "Deploy.Web", "TASK-1", "failure", "--failure-key", "db.migration-lock",
            agent="codex")
    assert a["status"] == "recorded" and a["id"].startswith("op-") and a["durableMemoryWritten"] is False
    assert a["event"]["operationKey"] == "deploy.web" and a["event"]["agent"] == "codex"
    assert a["event"]["kind"] == "operational"
    b = cli_as("remember-action", "--title", "Ran checklist", "--content", "green", "--operation-key", "release.check",
               "--outcome", "success", "--task-id", "TASK-2", "--agent", "cursor")
    assert b["durableMemoryWritten"] is False and b["event"]["agent"] == "cursor"
    assert snake_keys(a) == [] and snake_keys(b) == []
    # Outside the vault: no note anywhere, two events in the journal.
    assert _notes(vault_path) == before
    journal = _journal(vault_path)
    assert not journal.path.is_relative_to(vault_path)
    assert [e["id"] for e in journal.read()] == [a["id"], b["id"]]


@pytest.mark.parametrize("args,msg", [
    (("--operation-key", "deploy web!"), "characters a key may not hold"),
    (("--task-id", "  "), "task id is empty"),
    (("--title", " "), "title is empty"),
])
def test_bad_input_gets_one_line_and_nothing_is_written(vault_path, args, msg):
    base = {"--title": "T", "--content": "c", "--operation-key": "a.b", "--outcome": "success", "--task-id": "t1"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    res = cli_as("record-operation", *[x for kv in base.items() for x in kv], ok=False)
    assert res["_exit"] == 2 and msg in res["message"] and res["hint"]
    assert list(_journal(vault_path).read()) == []


@pytest.mark.parametrize("field,secret", [("--title", "AKIAIOSFODNN7EXAMPLE"),
                                          ("--content", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
                                          ("--task-id", "AKIAIOSFODNN7EXAMPLE")])
def test_secrets_are_refused(vault_path, field, secret):
    base = {"--title": "Deploy", "--content": "done", "--operation-key": "deploy.web", "--outcome": "failure",
            "--task-id": "t1", field: secret}
    res = cli_as("record-operation", *[x for kv in base.items() for x in kv], ok=False)
    assert res["error"] == "SecretDetected" and res["_exit"] == 1
    assert secret not in json.dumps(res)  # never echoed
    assert list(_journal(vault_path).read()) == []


# ---------------------------------------------------------------------------------------------- recall
def test_operational_events_show_only_with_include_operational(vault_path):
    remember("Deploy checklist", "Deploy the web app with the blue-green script after the migration.")
    ev = _op("Deploy blocked by migration lock", "deploy.web", "TASK-7", "failure", "--failure-key",
             "db.migration-lock")
    mine = _op("Codex private step about migration lock", "deploy.web", "TASK-8", agent="codex")
    plain = run("recall", "migration lock deploy", "--lexical")
    assert "operational" not in plain
    assert all(not h["path"].endswith(".jsonl") for h in plain["hits"])
    with_ops = run("recall", "migration lock deploy", "--lexical", "--include-operational")
    ops = with_ops["operational"]
    assert [o["id"] for o in ops][:2] and ev["id"] in [o["id"] for o in ops]
    assert all(o["kind"] == "operational" for o in ops)
    assert [h["path"] for h in with_ops["hits"]] == [h["path"] for h in plain["hits"]]  # ranking untouched
    assert snake_keys(with_ops["operational"]) == []
    # Unrelated questions match no event; agents see their own and agentless events, never another's.
    assert run("recall", "favourite pizza topping", "--lexical", "--include-operational")["operational"] == []
    as_cursor = cli_as("recall", "migration lock deploy", "--lexical", "--include-operational", agent="cursor")
    assert mine["id"] not in [o["id"] for o in as_cursor["operational"]]
    assert ev["id"] in [o["id"] for o in as_cursor["operational"]]


# ----------------------------------------------------------------------------------------- mine-patterns
def test_noise_rules():
    from hive_brain.memory.patterns import is_test_noise

    noisy = [{"task_id": "test-17"}, {"task_id": "fixture_a"}, {"task_id": "pytest7"}, {"task_id": "TMP"},
             {"task_id": "T-1", "agent": "test-agent"}, {"task_id": "T-1", "title": "[test] deploy"},
             {"task_id": "T-1", "title": "fixture: seed the db"}]
    work = [{"task_id": "TASK-1", "title": "Ran tests", "operation_key": "ci.run-tests"},
            {"task_id": "testimonial-page"}, {"task_id": "latest-release", "agent": "tester"},
            {"task_id": "T-2", "title": "Test suite was flaky"}]
    assert all(is_test_noise(e) for e in noisy)
    assert not any(is_test_noise(e) for e in work)


def test_mine_patterns_on_the_labelled_log_finds_every_planted_pattern_and_no_noise(monkeypatch):
    from benchmarks.operations import score
    from hive_brain.memory import patterns

    events, planted, noise = synthetic_log(tasks=200, seed=3)
    assert len(events) > 1000
    res = score(patterns.mine(events), planted, noise)
    assert res["missed"] == [] and res["recall"] == 1.0
    assert res["precision"] >= 0.9
    assert res["from_noise"] == []
    # The noise is real: without the test-noise rule, fixture patterns would be suggested.
    monkeypatch.setattr(patterns, "is_test_noise", lambda e: False)
    assert score(patterns.mine(events), planted, noise)["from_noise"]


def test_one_task_repeating_itself_is_rejected_not_suggested():
    from hive_brain.memory.patterns import mine

    evs = [{"id": f"op-{i:026d}", "ts": f"2026-11-01T00:00:{i:02d}Z", "operation_key": "cache.redis",
            "failure_key": "cache.oom", "outcome": "failure", "task_id": "TASK-1", "agent": "codex"} for i in range(30)]
    rep = mine(evs)
    assert rep["patterns"] == []
    assert rep["rejected"][0]["key"] == "cache.oom" and "1 distinct task" in rep["rejected"][0]["reason"]


def test_mine_patterns_cli_dry_run_then_enqueue_once(vault_path):
    before = _notes(vault_path)
    for i, task in enumerate(("TASK-1", "TASK-2", "TASK-3")):
        _op("Deploy failed", "deploy.web", task, "failure", "--failure-key", "db.migration-lock",
            agent=("codex", "cursor", "claude")[i])
        _op("Waited for the lock, deployed again", "deploy.web", task)
        _op("Failed in a fixture", "deploy.web", f"fixture-{i}", "failure", "--failure-key", "fixture.boom")
    dry = run("mine-patterns")
    assert dry["dryRun"] is True and [p["key"] for p in dry["patterns"]] == ["db.migration-lock"]
    p = dry["patterns"][0]
    assert p["kind"] == "failure" and p["evidence"]["tasks"] == ["TASK-1", "TASK-2", "TASK-3"]
    assert p["evidence"]["agents"] == ["claude", "codex", "cursor"] and len(p["evidence"]["eventIds"]) == 3
    assert p["evidence"]["firstSeen"] <= p["evidence"]["lastSeen"]
    assert p["resolutions"][0]["text"].startswith("Waited for the lock") and dry["testNoise"] == 3
    assert snake_keys(dry) == []
    assert run("review", "list") == []  # a dry run writes nothing
    # Only the owner queues proposals.
    denied = cli_as("mine-patterns", "--enqueue", agent="codex", ok=False)
    assert denied["error"] == "PermissionDenied"
    q = run("mine-patterns", "--enqueue")
    assert len(q["proposed"]) == 1 and q["proposed"][0]["type"] == "lesson"
    shown = run("review", "show", q["proposed"][0]["proposal"])
    assert shown["kind"] == "pattern" and shown["status"] == "pending" and shown["sources"] == p["evidence"]["eventIds"]
    assert "Waited for the lock" in shown["content"]
    assert {n for n in _notes(vault_path) - before if not n.startswith("Operations/Brain Review/")} == set()
    again = run("mine-patterns", "--enqueue")
    assert again["proposed"] == [] and "already proposed" in again["skipped"][0]["reason"]
    # The owner approves and applies it: the lesson becomes shared memory.
    run("review", "approve", shown["id"])
    applied = run("review", "apply", shown["id"])
    assert applied["status"] == "applied"
    assert run("get", "--memory-id", applied["id"])["meta"]["type"] == "lesson"


def test_since(vault_path):
    from hive_brain.memory.patterns import parse_since

    assert parse_since("2026-11-01") == "2026-11-01T00:00:00Z"
    assert parse_since("7d") is not None and parse_since(None) is None
    res = cli_as("mine-patterns", "--since", "last tuesday", ok=False)
    assert res["_exit"] == 2 and "neither a date nor an age" in res["message"]
    assert run("mine-patterns", "--since", "2999-01-01")["considered"] == 0


# ------------------------------------------------------------------------------------------ record-usage
def test_record_usage(vault_path):
    from hive_brain.config import resolve
    from hive_brain.errors import UsageError
    from hive_brain.memory.operations import record_usage, usage_counts
    from hive_brain.store.vault import open_vault

    a = run("record-usage", "--memory-ids", "mem-a,mem-b", "--kind", "retrieved")
    run("record-usage", "--memory-ids", "mem-a", "--kind", "final-answer", "--query", "how do we deploy?")
    assert a["status"] == "recorded" and a["memoryIds"] == ["mem-a", "mem-b"] and snake_keys(a) == []
    state = open_vault(resolve(vault=str(vault_path))).state
    counts = usage_counts(state)
    last = counts["mem-a"]["last"]
    assert counts == {"mem-a": {"retrieved": 1, "finalAnswer": 1, "last": last},
                      "mem-b": {"retrieved": 1, "finalAnswer": 0, "last": counts["mem-b"]["last"]}}
    assert last.endswith("Z") and last >= counts["mem-b"]["last"]
    assert usage_counts(state, kind="final-answer") == {"mem-a": {"retrieved": 0, "finalAnswer": 1, "last": last}}
    assert usage_counts(state, since="2999-01-01") == {} and usage_counts(state, since=dt.date(2000, 1, 1)) == counts
    with pytest.raises(UsageError, match="not an ISO 8601"):
        usage_counts(state, since="last week")
    bad = cli_as("record-usage", "--memory-ids", "../etc", "--kind", "retrieved", ok=False)
    assert bad["_exit"] == 2 and "not a memory id" in bad["message"]
    with pytest.raises(UsageError, match="--kind retrieved"):
        record_usage(state, ["mem-a"], "seen")


def test_answer_logs_the_memories_it_packed_as_retrieved(vault_path):
    from hive_brain.config import resolve
    from hive_brain.memory.operations import usage_counts, usage_log
    from hive_brain.store.vault import open_vault

    mem = remember("Release steps", "To release, bump the version, tag it and publish the package.")
    pack = run("answer", "how do we release the package?", "--lexical")
    assert not pack["abstained"] and mem["id"] in [i["id"] for i in pack["items"]]
    state = open_vault(resolve(vault=str(vault_path))).state
    assert usage_counts(state)[mem["id"]]["retrieved"] == 1 and usage_counts(state)[mem["id"]]["finalAnswer"] == 0
    assert [r.get("query") for r in usage_log(state).read()] == [None]  # the question is not kept
    run("answer", "favourite pizza topping?", "--lexical")  # abstains: nothing logged
    assert len(list(usage_log(state).read())) == 1
