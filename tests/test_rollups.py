"""consolidate --apply-rollups: runs found by pattern, dry run writes nothing, one transaction and one
generation, notes kept as history (get, history recall, replay), scopes kept apart, all-or-nothing
under kill -9 at every journal step."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hive_brain.engine import Engine
from hive_brain.memory.model import MemoryInput
from hive_brain.memory.rollups import run_pattern
from hive_brain.store.journal import STEPS

from .helpers import cli_as, doctor, run
from .test_json_casing import snake_keys

TICKERS = ["AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "GOOG", "META", "NFLX", "AMD", "INTC", "ORCL", "IBM"]


def seed_trades(n: int = 12, *, agent: str | None = None, start: int = 1, title: str = "Paper trade") -> list[str]:
    """``n`` one-per-run notes in one transaction (the CLI's batch stops at 25)."""
    store = Engine.open().memory
    if agent:
        store = store.for_agent(agent)
    ids = []
    with store.transaction("seed") as tx:
        for i in range(start, start + n):
            t = TICKERS[i % len(TICKERS)]
            _p, meta = tx.remember(MemoryInput(
                type="event", title=f"{title} 2026-11-{i:02d} {t}" if i <= 28 else f"{title} run {i} {t}",
                content=f"Bought 10 {t} at the open on run {i}; closed at +{i}.{i % 7}% by the bell."))
            ids.append(meta["id"])
    return ids


def _vault_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.md")) if ".hive-brain" not in p.parts}


def _gen() -> int:
    return int(Engine.open().generations()["current"])


def test_run_pattern():
    assert run_pattern("Paper trade 2026-11-03 AAPL") == "paper trade"
    assert run_pattern("trade:paper:0042") == "trade paper"
    assert run_pattern("Nightly backtest #17") == "nightly backtest"
    assert run_pattern("Use pnpm for installs") is None  # no digit: a topic, not a run
    assert run_pattern("2026-11-03 standup") is None  # nothing before the digit to name a run by


def test_dry_run_writes_nothing_then_one_transaction_one_generation(vault_path):
    ids = seed_trades(12)
    run("remember", "--type", "fact", "--title", "Broker account", "--content", "We paper-trade at Alpaca.")
    for i in range(1, 11):  # the user's decisions are never a run log, digits or not
        run("remember", "--type", "decision", "--title", f"ADR {i:03d} storage choice {i}",
            "--content", f"Decision {i}: keep notes as Markdown files, variant {i}.")
    before_hits = run("recall", "what did we trade on 2026-11-03?")["hits"]
    before, gen0 = _vault_digest(vault_path), _gen()

    dry = run("consolidate", "--apply-rollups")
    r = dry["rollups"]
    assert r["dryRun"] is True and r["summaries"] == 1 and r["notes"] == 12
    assert r["runs"][0]["pattern"] == "paper trade" and r["runs"][0]["type"] == "event" and snake_keys(dry) == []
    assert _vault_digest(vault_path) == before and _gen() == gen0, "a dry run wrote something"

    done = run("consolidate", "--apply-rollups", "--confirm")["rollups"]
    assert _gen() == gen0 + 1, "one consolidation is one generation"
    s = done["runs"][0]["summary"]
    assert s["count"] == 12 and s["extends"] is None and snake_keys(done) == []
    summary = run("get", s["id"])
    assert summary["status"] == "active" and summary["meta"]["rollup_count"] == 12
    assert summary["meta"]["layer"] == "shared"
    for mid in ids:  # every rolled-up note is still readable, and names its summary
        g = run("get", mid)
        assert g["status"] == "superseded" and g["meta"]["rolled_up_into"] == s["id"], g
        assert mid in summary["content"]
    # Nothing else changed: the decisions and the fact are as they were.
    after = _vault_digest(vault_path)
    changed = {p for p in after if before.get(p) != after[p]}
    assert len(changed) == 13  # 12 rewritten notes + the summary

    # A question about one trade now finds the roll-up; a history question finds the trade itself.
    hits = run("recall", "what did we trade on 2026-11-03?")["hits"]
    assert hits and hits[0]["id"] == s["id"], hits[:2]
    hist = run("recall", "which paper trade did we previously make in NVDA?")["hits"]
    assert any(h.get("historical") and h["id"] in ids for h in hist), hist[:3]
    # replay at the generation before the roll-up answers as before.
    replayed = run("replay", "what did we trade on 2026-11-03?", "--generation", str(gen0))["hits"]
    # The same answer, and every rank scored as before (which of several notes with exactly the same
    # score comes first differs between two builds of an index, roll-up or not).
    assert replayed[0]["id"] == before_hits[0]["id"] == ids[2]
    assert [round(h["score"], 6) for h in replayed] == [round(h["score"], 6) for h in before_hits]
    assert doctor()["problems"] == []

    again = run("consolidate", "--apply-rollups", "--confirm")["rollups"]
    assert again["summaries"] == 0 and _gen() == gen0 + 1, "nothing left to roll up: no new generation"


def test_a_new_run_extends_the_summary(vault_path):
    seed_trades(10)
    first = run("consolidate", "--apply-rollups", "--confirm")["rollups"]["runs"][0]["summary"]
    later = seed_trades(10, start=11)
    second = run("consolidate", "--apply-rollups", "--confirm")["rollups"]["runs"][0]["summary"]
    assert second["extends"] == first["id"] and second["count"] == 20
    assert run("get", first["id"])["status"] == "superseded"
    body = run("get", second["id"])["content"]
    assert all(mid in body for mid in later) and body.count("\n- ") == 20


def test_scopes_stay_apart_and_an_agent_rolls_up_only_its_own(vault_path):
    mine = seed_trades(10, agent="trader-a", title="Backtest")
    seed_trades(10, agent="trader-b", title="Backtest")
    # trader-b sees only its own run; trader-a's notes never leave trader-a's layer.
    as_b = cli_as("consolidate", "--apply-rollups", "--confirm", agent="trader-b", enforce=True)["rollups"]
    assert as_b["summaries"] == 1 and {r["agent"] for r in as_b["runs"]} == {"trader-b"}
    assert as_b["runs"][0]["summary"]["path"].startswith("Agents/trader-b/")
    assert cli_as("get", mine[0], agent="trader-a")["status"] == "active"
    # The owner rolls up trader-a's run into a summary in trader-a's own private layer, not shared memory.
    owner = run("consolidate", "--apply-rollups", "--confirm")["rollups"]
    assert [(r["layer"], r["agent"]) for r in owner["runs"]] == [("private", "trader-a")]
    s = owner["runs"][0]["summary"]
    assert s["path"].startswith("Agents/trader-a/Memory/")
    g = cli_as("get", s["id"], agent="trader-a")
    assert g["meta"]["layer"] == "private" and g["meta"]["agent"] == "trader-a"
    assert run("get", s["id"], ok=False)["_exit"] != 0, "the owner's shared view must not see it"


def test_a_note_that_cannot_be_rewritten_is_left_as_it_is(vault_path):
    ids = seed_trades(10)
    folder = vault_path / run("get", ids[0])["path"].rsplit("/", 1)[0]
    legacy = folder / "paper-trade-legacy.md"  # saved by an old editor in Windows-1252: read, never rewritten
    text = ("---\nid: mem-legacy-caf\ntype: event\ntitle: Paper trade 2026-11-29 CAFÉ\nlayer: shared\n"
            "status: active\n---\nBought CAFÉ at the open.\n")
    legacy.write_bytes(text.encode("cp1252"))
    before = legacy.read_bytes()
    res = run("consolidate", "--apply-rollups", "--confirm")["rollups"]
    assert res["summaries"] == 1 and res["notes"] == 10, res
    assert [k["id"] for k in res["runs"][0]["skipped"]] == ["mem-legacy-caf"]
    assert legacy.read_bytes() == before and run("get", "mem-legacy-caf")["status"] == "active"
    assert {run("get", mid)["status"] for mid in ids} == {"superseded"}


def test_prefix_min_run_and_bad_combinations(vault_path):
    store = Engine.open().memory
    with store.transaction("seed") as tx:
        for t in TICKERS[:5]:
            tx.remember(MemoryInput(type="event", title=f"Position in {t}", content=f"Holding {t} flat.",
                                    memory_key=f"positions/{t.lower()}"))
    assert run("consolidate", "--apply-rollups")["rollups"]["summaries"] == 0  # no digits, no run
    res = run("consolidate", "--apply-rollups", "--prefix", "positions/", "--min-run", "5")["rollups"]
    assert res["summaries"] == 1 and res["runs"][0]["basis"] == "prefix"
    bad = run("consolidate", "--min-run", "5", ok=False)
    assert bad["_exit"] != 0 and "--apply-rollups" in str(bad)
    bad = run("consolidate", "--confirm", ok=False)
    assert bad["_exit"] != 0 and "--apply-rollups" in str(bad)


ROLLUP = """
from hive_brain.engine import Engine
from hive_brain.memory.rollups import rollups
rollups(Engine.open().memory, confirm=True)
"""


@pytest.mark.parametrize("step", STEPS)
def test_kill_mid_rollup_leaves_all_or_nothing(vault_path, step):
    ids = seed_trades(10)
    env = {**os.environ, "HIVE_BRAIN_CRASH_AT": step}
    proc = subprocess.run([sys.executable, "-c", ROLLUP], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert doctor()["problems"] == []  # any next command recovers first
    statuses = {run("get", mid)["status"] for mid in ids}
    summaries = run("recall", "roll-up paper trade", "--json")["hits"]
    rolled = [h for h in summaries if str(h.get("title", "")).startswith("Roll-up:")]
    assert statuses in ({"active"}, {"superseded"}), statuses
    assert (statuses == {"superseded"}) == bool(rolled), (statuses, rolled)
    if step in ("after-mark", "mid-apply", "after-apply", "after-publish"):
        assert statuses == {"superseded"}
    if step in ("after-record", "mid-stage", "after-stage"):
        assert statuses == {"active"}
    assert not list((vault_path / ".hive-brain/staging").glob("*/*")), "staging left behind"
