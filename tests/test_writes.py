"""Writes: the fair flock lock, durable pending writes, and vector deletions queued for the embedder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hive_brain.errors import LockTimeout
from hive_brain.store import pending as pending_writes
from hive_brain.store.journal import STEPS
from hive_brain.store.lock import FileLock, vault_lock

from .helpers import doctor, remember, run

HOLD = """
import sys, time
from hive_brain.store.lock import FileLock
lock = FileLock(sys.argv[1])
assert lock.acquire(0, command="test-holder")
print("held", flush=True)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 300)
"""


def _holder(path: Path, seconds: float | None = None) -> subprocess.Popen:
    args = [sys.executable, "-c", HOLD, str(path)] + ([str(seconds)] if seconds is not None else [])
    p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _kill(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()


# -- the lock --------------------------------------------------------------------------------------
def test_file_lock_try_holder_and_release_on_kill9(tmp_path):
    path = tmp_path / "server.lock"
    p = _holder(path)
    try:
        lock = FileLock(path)
        assert not lock.acquire(0)  # the "am I the only server" try
        assert lock.holder() == p.pid
        assert "test-holder" in lock.describe_holder()
    finally:
        _kill(p)
    assert lock.acquire(0, command="me")  # the OS released the killed holder's lock
    assert lock.holder() == os.getpid()
    lock.release()
    assert lock.holder_info() is None  # a released lock names nobody


def test_blocking_acquisition_gets_the_lock_when_the_holder_lets_go(tmp_path):
    path = tmp_path / "lock"
    p = _holder(path, seconds=1.0)
    try:
        lock = FileLock(path)
        assert lock.acquire(60)  # waits in the kernel queue, woken by the release at exit
        assert lock.holder() == os.getpid()
        lock.release()
    finally:
        _kill(p)


def test_a_waiter_that_gave_up_does_not_keep_the_lock(tmp_path):
    path = tmp_path / "lock"
    p = _holder(path)
    lock = FileLock(path)
    try:
        assert not lock.acquire(0.2)  # its helper thread is still queued in the kernel
    finally:
        _kill(p)
    # The abandoned helper takes the lock when the holder dies and hands it on at once.
    assert lock.acquire(60)
    lock.release()
    other = FileLock(path)
    assert other.acquire(60)
    other.release()


def test_vault_lock_is_reentrant_per_thread_and_exclusive_across_threads(tmp_path):
    state = tmp_path / "state"
    with vault_lock(state, command="outer"), vault_lock(state, command="inner"):
        box: dict[str, object] = {}

        def other() -> None:
            try:
                with vault_lock(state, timeout=0.1):
                    box["got"] = True
            except Exception as e:  # noqa: BLE001
                box["err"] = type(e).__name__

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert box == {"err": "LockTimeout"}
    with vault_lock(state, timeout=30):  # released by the outer exit only
        pass


# -- pending writes --------------------------------------------------------------------------------
WRITE_THEN_WAIT = """
import json, sys, time
from hive_brain.engine import Engine
from hive_brain.memory.store import MemoryInput
eng = Engine.open()
res = eng.memory.remember(MemoryInput(type="fact", title=sys.argv[1], content=sys.argv[2]))
print(json.dumps(res), flush=True)
time.sleep(300)
"""


def _state(vault_path: Path) -> Path:
    from hive_brain.engine import Engine

    return Engine.open().vault.state


def _titles(vault_path: Path) -> set[str]:
    from hive_brain.store.notes import parse_text

    out = set()
    for p in vault_path.rglob("*.md"):
        if ".hive-brain" in p.parts or "Templates" in p.parts:
            continue
        n = parse_text(p.name, p.read_text())
        if n.meta.get("id", "").startswith("mem-"):
            out.add(n.meta["title"])
    return out


def test_write_that_cannot_lock_is_kept_pending_and_survives_kill9(vault_path, monkeypatch):
    state = _state(vault_path)
    holder = _holder(state / "lock")
    env = {**os.environ, "HIVE_BRAIN_LOCK_TIMEOUT": "0.3"}
    writer = subprocess.Popen([sys.executable, "-c", WRITE_THEN_WAIT, "Queued fact", "Kept while the vault was busy."],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert writer.stdout is not None
        res = json.loads(writer.stdout.readline())
        # The writer said "pending": kill -9 it at once, the record must already be on disk.
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        assert res["status"] == "pending" and res["id"].startswith("pw-")
        assert f"pid {holder.pid}" in res["message"]
        listed = pending_writes.list_pending(state)
        assert [(r["id"], r["op"], r["state"], r["what"]) for r in listed] == [(res["id"], "remember", "queued", "Queued fact")]
        assert "Queued fact" not in _titles(vault_path)
    finally:
        _kill(writer)
        _kill(holder)
    # The next writer applies it first, then its own write.
    remember("Next write", "Applies the queued one first.")
    assert {"Queued fact", "Next write"} <= _titles(vault_path)
    assert pending_writes.list_pending(state) == []
    log = (state / "pending-writes" / "applied.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["id"] == res["id"]
    # Found by search like any other memory (the replay published its generation).
    hits = run("recall", "queued fact vault busy", "--lexical")
    assert any(h["title"] == "Queued fact" for h in hits["hits"])


def test_pending_write_is_replayed_as_its_agent_and_a_refused_one_is_kept(vault_path, monkeypatch):
    state = _state(vault_path)
    holder = _holder(state / "lock")
    try:
        monkeypatch.setenv("HIVE_BRAIN_LOCK_TIMEOUT", "0.2")
        mine = run("--agent", "bot", "remember", "--type", "fact", "--title", "Bot private", "--content", "Only bot knows.")
        bad = run("evolve", "--memory-id", "mem-does-not-exist", "--content", "New truth.")
        assert mine["status"] == bad["status"] == "pending"
    finally:
        _kill(holder)
        monkeypatch.delenv("HIVE_BRAIN_LOCK_TIMEOUT")
    remember("Owner write", "Triggers the replay.")
    bot_notes = list((vault_path / "Agents" / "bot" / "Memory").glob("*.md"))
    assert len(bot_notes) == 1 and "Only bot knows." in bot_notes[0].read_text()
    left = pending_writes.list_pending(state)
    # Nothing dropped: the evolve that can no longer apply stays, failed, with the reason.
    assert [(r["id"], r["state"]) for r in left] == [(bad["id"], "failed")]
    assert "NotFound" in left[0]["error"]
    remember("Another write", "Does not retry a failed record.")
    assert [r["id"] for r in pending_writes.list_pending(state)] == [bad["id"]]


# -- vectors: deletions queued, never done under a write ------------------------------------------
PROBE = """
import json, sys
from hive_brain.engine import Engine
eng = Engine.open()
op = sys.argv[1]
if op == "evolve":
    eng.memory.evolve(sys.argv[2], "We moved from pnpm to bun.")
else:
    eng.memory.delete(sys.argv[2], confirm=True)
print(json.dumps(sorted(m for m in ("lancedb", "pyarrow", "onnxruntime") if m in sys.modules)))
"""


def test_write_does_not_touch_vectors_and_next_embed_pass_removes_stale_ones(vault_path, with_model):
    from hive_brain.engine import Engine

    a = remember("Package manager", "Use pnpm for JavaScript.")
    b = remember("Editor", "Use neovim with lazy.nvim.", "fact")
    eng = Engine.open()
    eng.indexer.embed_pending()
    vec = eng.indexer.vectors
    before, b_rows = vec.count(), len(vec.rows_for([b["path"]]))
    assert before > 0 and vec.rows_for([a["path"]]) and b_rows

    for op, mid in (("evolve", a["id"]), ("delete", b["id"])):
        proc = subprocess.run([sys.executable, "-c", PROBE, op, mid], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.splitlines()[-1]) == []  # no LanceDB (nor model) under the write lock

    eng = Engine.open()
    idx = eng.indexer
    assert idx.queued_deletions() == 2 and idx.pending_count() > 2
    # Not yet applied: the old rows are still in the table.
    assert idx.vectors.rows_for([b["path"]])
    res = idx.embed_pending()
    assert res["pending"] == 0 and idx.queued_deletions() == 0
    assert idx.vectors.rows_for([b["path"]]) == []  # the deleted note's vectors are gone
    old_rows = idx.vectors.rows_for([a["path"]])
    assert old_rows and {r["status"] for r in old_rows} == {"superseded"}  # re-embedded with its new state
    new = eng.memory.get(a["id"])["chain"][-1]
    new_rows = len(idx.vectors.rows_for([new["path"]]))
    assert new_rows and idx.vectors.count() == before - b_rows + new_rows  # nothing else left behind


def test_pending_module_shows_damaged_records_without_replaying_or_dropping_them(tmp_path):
    state = tmp_path / "state"
    rec = pending_writes.add(state, "remember", {"inp": {"title": "t"}}, agent=None, reason="busy")
    (pending_writes.pending_dir(state) / "pw-zzz.json").write_text("{torn")
    listed = pending_writes.list_pending(state)
    # Moved aside (kept byte for byte, listed as damaged), not retried and not shown as a write.
    assert [r["id"] for r in listed] == [rec["id"]]
    assert [r["id"] for r in pending_writes.queued(state)] == [rec["id"]]
    aside = [p for p in pending_writes.pending_dir(state).iterdir() if ".damaged-" in p.name]
    assert [p.read_text() for p in aside] == ["{torn"]


# -- a one-new-note write commits by rename, without a journal record -------------------------------
REMEMBER_ONE = """
from hive_brain.engine import Engine
from hive_brain.memory.store import MemoryInput
Engine.open().memory.remember(MemoryInput(type="fact", title="Crash test", content="All or nothing."))
"""


@pytest.mark.parametrize("step", STEPS)
def test_new_note_write_killed_at_every_step_is_all_or_nothing(vault_path, step):
    proc = subprocess.run([sys.executable, "-c", REMEMBER_ONE], env={**os.environ, "HIVE_BRAIN_CRASH_AT": step},
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    doc = doctor()
    assert doc["problems"] == []
    assert list((vault_path / ".hive-brain/staging").glob("*")) == [], "staging left behind"
    written = "Crash test" in _titles(vault_path)
    assert written == (step in ("after-mark", "mid-apply", "after-apply", "after-publish"))
    # The index follows the notes on the next read either way, and writes still work.
    hits = run("recall", "all or nothing crash test", "--lexical")
    assert any(h["title"] == "Crash test" for h in hits["hits"]) == written
    remember("After crash", "Writes still work.", "fact")


def test_apply_pending_without_a_write_of_its_own(vault_path, monkeypatch):
    from hive_brain.engine import Engine

    state = _state(vault_path)
    holder = _holder(state / "lock")
    try:
        monkeypatch.setenv("HIVE_BRAIN_LOCK_TIMEOUT", "0.2")
        res = remember("Held back", "Applied by the server or doctor.", "fact")
        assert res["status"] == "pending"
        with pytest.raises(LockTimeout):
            Engine.open().memory.apply_pending(timeout=0.1)  # still busy: it stays pending
        assert [r["id"] for r in pending_writes.list_pending(state)] == [res["id"]]
    finally:
        _kill(holder)
    assert Engine.open().memory.apply_pending() == []
    assert "Held back" in _titles(vault_path)


def test_a_process_with_lancedb_loaded_deletes_vectors_at_once(vault_path, with_model):
    from hive_brain.engine import Engine

    a = remember("Shell", "Use fish as the login shell.", "fact")
    eng = Engine.open()
    eng.indexer.embed_pending()  # loads LanceDB in this process, as the server has it
    assert eng.indexer.vectors.rows_for([a["path"]])
    eng.memory.delete(a["id"], confirm=True)
    assert eng.indexer.queued_deletions() == 0
    assert eng.indexer.vectors.rows_for([a["path"]]) == []


def test_every_write_command_reports_pending_in_text_and_json(vault_path, monkeypatch, tmp_path):
    from click.testing import CliRunner

    from hive_brain.cli.app import main

    m = remember("Chain head", "Version one.", "fact")
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([{"type": "fact", "title": "Batched", "content": "From a batch."}]))
    state = _state(vault_path)
    holder = _holder(state / "lock")
    cmds = [["remember", "--type", "fact", "--title", "T", "--content", "C"],
            ["evolve", "--memory-id", m["id"], "--content", "Version two."],
            ["update", "--memory-id", m["id"], "--tags", "x"],
            ["delete", "--memory-id", "mem-nope", "--confirm"],
            ["batch", "--file", str(batch)]]
    try:
        for args in cmds:
            for fmt in ([], ["--json"]):
                res = CliRunner().invoke(main, [*args, *fmt], env={"HIVE_BRAIN_LOCK_TIMEOUT": "0.1"},
                                         catch_exceptions=False)
                assert res.exit_code == 0, res.output
                assert "pending" in res.output and "pw-" in res.output, (args, res.output)
    finally:
        _kill(holder)
    assert len(pending_writes.list_pending(state)) == 2 * len(cmds)
