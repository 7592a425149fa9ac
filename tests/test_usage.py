"""Usage signals in ranking: the capped ``usage`` feature, the table ranking reads (folded once, then
only the tail of the log), and recall end to end on a real index (a used memory moves up among
near-ties only; a much better match is never buried)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hive_brain.memory import usage as usage_mod
from hive_brain.memory.operations import record_usage, usage_log
from hive_brain.memory.usage import UsageTable, table
from hive_brain.search.features import Features, breakdown, details, score
from hive_brain.search.params import PARAMS
from hive_brain.store import oplog
from tests.helpers import remember, run

P = PARAMS


# ------------------------------------------------------------------------------------ the feature
def test_usage_multiplies_the_score_by_at_most_its_cap():
    f = Features(lex_rank=0, lex_norm=1.0, n_terms=3, coverage=0.8)
    plain = score(f)
    assert score(replace(f, usage=0.0)) == plain  # no usage: the score is unchanged, to the bit
    half, full = score(replace(f, usage=0.5)), score(replace(f, usage=1.0))
    assert plain < half < full == pytest.approx(plain * (1 + P["w_usage"]))
    assert score(replace(f, usage=1e9)) == full  # however it was computed, never past the cap
    assert details(replace(f, usage=0.5), breakdown(replace(f, usage=0.5)))["usage"] == 0.5


def _write(state: Path, recs: list[dict]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "usage-events.jsonl", "ab") as fh:
        for r in recs:
            fh.write((json.dumps(r) + "\n").encode())


def _rec(ids: list[str], kind: str = "retrieved", ts: str = "2026-11-30T10:00:00Z") -> dict:
    return {"id": "use-x", "ts": ts, "kind": kind, "memory_ids": ids, "agent": None, "query": None}


def test_weight_is_log_scaled_final_answers_weigh_more_and_old_use_fades(tmp_path):
    t = UsageTable(tmp_path)
    now = time.time()
    t.new = {"r1": [1, 0, now], "r4": [4, 0, now], "f1": [0, 1, now], "many": [10_000, 10_000, now],
                "old": [0, 1, now - 2 * P["usage_half_life_days"] * 86400]}
    w = {k: t.weight(k, P, now) for k in t.counts}
    assert 0 < w["r1"] < w["r4"] < w["many"] == 1.0
    assert w["r4"] == pytest.approx(w["f1"])  # a final answer counts as usage_final retrievals
    assert w["old"] == pytest.approx(w["f1"] / 4)  # two half-lives
    assert t.weight("never", P, now) == 0.0


def test_table_folds_the_tail_only_then_starts_over_at_rotation(tmp_path, monkeypatch):
    state = tmp_path / "s"
    _write(state, [_rec(["a", "b"]), _rec(["a"], "final-answer")])
    t = UsageTable(state)
    t.refresh()
    assert t.counts["a"][:2] == [1, 1] and t.counts["b"][:2] == [1, 0]
    folded: list[int] = []
    real = UsageTable._fold
    monkeypatch.setattr(UsageTable, "_fold", lambda self, data, counts: folded.append(len(data)) or real(self, data, counts))
    t.refresh()
    assert folded == []  # nothing logged since: two stats, no read
    tail = _rec(["b"])
    _write(state, [tail])
    partial = b'{"kind": "retrieved", "memory_ids": ["c"]'  # a line still being written
    with open(state / "usage-events.jsonl", "ab") as fh:
        fh.write(partial)
    t.refresh()
    assert folded == [len(json.dumps(tail)) + 1 + len(partial)] and t.counts["b"][0] == 2 and "c" not in t.counts
    with open(state / "usage-events.jsonl", "ab") as fh:
        fh.write(b', "ts": "2026-11-30T11:00:00Z"}\n')
    t.refresh()
    assert t.counts["c"][0] == 1  # the finished line counts once
    # Rotation through the real log, one refresh per append (as a server sees it): the live file it
    # was reading becomes the old part; nothing is folded twice and nothing is folded again.
    monkeypatch.setattr(oplog, "MAX_BYTES", 400)
    rebuilds: list[int] = []
    real_rebuild = UsageTable._rebuild
    monkeypatch.setattr(UsageTable, "_rebuild", lambda self: rebuilds.append(1) or real_rebuild(self))
    log = usage_log(state)

    def expected() -> dict[str, int]:
        out: dict[str, int] = {}
        for r in log.read():
            for m in r["memory_ids"]:
                out[m] = out.get(m, 0) + 1
        return out

    rotations = 0
    for i in range(12):
        before = log.rotated.stat().st_ino if log.rotated.exists() else None
        record_usage(state, [f"d{i % 3}"], "retrieved")
        rotations += (log.rotated.stat().st_ino if log.rotated.exists() else None) != before
        t.refresh()
        assert {k: v[0] + v[1] for k, v in t.counts.items()} == expected()
    assert rotations >= 2 and rebuilds == []
    # Two rotations between reads: the old part aged out unseen, so the table folds the log again.
    for _ in range(8):
        record_usage(state, ["e"], "final-answer")
    t.refresh()
    assert {k: v[0] + v[1] for k, v in t.counts.items()} == expected() and rebuilds == [1]


def test_the_table_is_kept_on_disk_for_short_processes_and_a_damaged_copy_is_rebuilt(tmp_path, monkeypatch):
    state = tmp_path / "s"
    monkeypatch.setattr(usage_mod, "SAVE_AFTER_BYTES", 1)
    _write(state, [_rec(["a"], "final-answer"), _rec(["a", "b"])])
    t = UsageTable(state)
    t.refresh()
    saved = json.loads((state / "usage-table.json").read_text())
    assert saved["new"]["a"][:2] == [1, 1] and saved["offset"] == (state / "usage-events.jsonl").stat().st_size
    folded: list[int] = []
    real = UsageTable._fold
    monkeypatch.setattr(UsageTable, "_fold", lambda self, data, counts: folded.append(len(data)) or real(self, data, counts))
    fresh = UsageTable(state)  # another process: starts from the saved table, reads nothing more
    fresh.refresh()
    assert folded == [] and fresh.counts == t.counts
    (state / "usage-table.json").write_text("{not json")
    again = UsageTable(state)
    again.refresh()
    assert again.counts == t.counts and folded  # rebuilt from the log
    (state / "usage-events.jsonl").unlink()
    again.refresh()
    assert again.counts == {}


# ------------------------------------------------------------------------------------ recall end to end
def _hits(query: str, **opts: object) -> list[dict]:
    if opts:  # every candidate, weak ones too (no abstention, no tail cut)
        from hive_brain.engine import Engine

        return Engine.open().recall(query, semantic=False, limit=5, **opts)["hits"]
    return run("recall", query, "--lexical", "--limit", "5")["hits"]


def _state() -> Path:
    from hive_brain.config import resolve
    from hive_brain.store.vault import open_vault

    return open_vault(resolve()).state


def test_a_used_memory_moves_up_among_near_ties_only(vault_path):
    a = remember("Deploy checklist for the web app", "Run the database migrations, then restart the web workers.", "procedure")
    b = remember("Deploy checklist for the web service", "Run the database migrations, then restart all web workers.", "procedure")
    far = remember("Rotating the signing keys", "Rotate the signing keys with vault-cli rotate --all, then restart the web workers.", "procedure")
    question = "deploy checklist: run the database migrations"
    before = _hits(question)
    top, second = before[0], before[1]
    assert {top["id"], second["id"]} == {a["id"], b["id"]}
    assert second["score"] > top["score"] / (1 + P["w_usage"])  # a near-tie: within the cap
    assert all(h["scoreDetails"]["usage"] == 0 for h in before)
    state = _state()
    record_usage(state, [second["id"]], "final-answer")
    after = _hits(question)
    assert after[0]["id"] == second["id"] and after[0]["scoreDetails"]["usage"] > 0  # it moved up
    # Retrieving the far note any number of times cannot lift it over the two that match better.
    for _ in range(50):
        record_usage(state, [far["id"]], "final-answer")
    hits = _hits(question)
    far_hit = next((h for h in hits if h["id"] == far["id"]), None)
    assert [h["id"] for h in hits[:2]] == [second["id"], top["id"]]
    if far_hit is not None:
        plain = next(h for h in before if h["id"] == far["id"])["score"]
        assert far_hit["scoreDetails"]["usage"] == 1.0 and far_hit["score"] <= plain * (1 + P["w_usage"]) + 1e-6


def test_a_much_better_match_is_never_buried_by_any_amount_of_usage(vault_path):
    keys = remember("Rotating the API keys", "Rotate the API keys with vault-cli rotate --all, then restart the workers.", "procedure")
    other = remember("Restarting workers", "Restart the workers after any config change; keys are reloaded then.", "procedure")
    question = "how do I rotate the API keys?"
    before = {h["id"]: h["score"] for h in _hits(question, abstain=False, drop_ratio=0.0)}
    assert before[keys["id"]] > before[other["id"]] * (1 + P["w_usage"])
    state = _state()
    for _ in range(20):
        record_usage(state, [other["id"]], "final-answer")
        record_usage(state, [other["id"]], "retrieved")
    hits = _hits(question, abstain=False, drop_ratio=0.0)
    assert hits[0]["id"] == keys["id"] and _hits(question)[0]["id"] == keys["id"]
    o = next(h for h in hits if h["id"] == other["id"])
    assert o["scoreDetails"]["usage"] == 1.0 and o["score"] == pytest.approx(before[other["id"]] * (1 + P["w_usage"]), abs=2e-6)
    assert table(state).counts[other["id"]][:2] == [20, 20]
