"""Kill the writer (SIGKILL) at every step of the journal; the next command must leave no half change."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hive_brain.store.journal import STEPS
from hive_brain.store.notes import parse_text

from .helpers import count_calls, doctor, remember, run

SCRIPT = """
import sys
from hive_brain.engine import Engine
eng = Engine.open()
eng.memory.evolve(sys.argv[1], "We switched to bun for speed.")
"""


def _notes(vault: Path) -> dict[str, dict]:
    out = {}
    for p in (vault / "Memory/Distillations/Agent Memory").glob("*.md"):
        n = parse_text(p.name, p.read_text())
        assert n.problem is None, (p, n.problem)
        out[n.meta["id"]] = n.meta
    return out


@pytest.mark.parametrize("step", STEPS)
def test_kill_at_every_step_then_recover(vault_path, step):
    old = remember("Package manager", "Use pnpm.")
    remember("Unrelated", "Keep me intact.", "fact")
    env = {**os.environ, "HIVE_BRAIN_CRASH_AT": step}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, old["id"]], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # Any next command recovers first.
    doc = doctor()
    assert doc["problems"] == []
    notes = _notes(vault_path)
    staged = list((vault_path / ".hive-brain/staging").glob("*/*"))
    assert staged == [], "staging left behind"
    heads = [m for m in notes.values() if m["memory_key"] == "preference/package-manager" and m["status"] == "active"]
    assert len(heads) == 1, "exactly one current version"
    if len(notes) == 3:  # rolled forward: new note and old note both updated
        assert notes[old["id"]]["status"] == "superseded"
        new_id = notes[old["id"]]["superseded_by"]
        assert notes[new_id]["supersedes"] == old["id"]
    else:  # rolled back: nothing of the change is visible
        assert len(notes) == 2 and notes[old["id"]]["status"] == "active"
        assert not notes[old["id"]].get("superseded_by")
    # Staged-and-marked records must roll forward (the change was fully staged).
    if step in ("after-mark", "mid-apply", "after-apply", "after-publish"):
        assert len(notes) == 3
    if step in ("after-record", "mid-stage", "after-stage"):
        assert len(notes) == 2
    # The vault still accepts writes.
    remember("After crash", "Writes still work.", "fact")


UPDATE = """
import sys
from hive_brain.engine import Engine
Engine.open().memory.update(sys.argv[1], content="Use bun.", tags=["tooling"])
"""


@pytest.mark.parametrize("step", STEPS)
def test_kill_a_one_note_update_at_every_step_then_recover(vault_path, step):
    """A one-note update swaps its staged file in without a journal record: killed anywhere, the
    note is the old one (before the swap) or the new one (after it), never anything else."""
    res = remember("Package manager", "Use pnpm.")
    path = vault_path / res["path"]
    before = path.read_text(encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", UPDATE, res["id"]], env={**os.environ, "HIVE_BRAIN_CRASH_AT": step},
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert doctor()["problems"] == []
    assert list((vault_path / ".hive-brain/staging").glob("*")) == [], "staging left behind"
    text = path.read_text(encoding="utf-8")
    meta = parse_text(path.name, text).meta
    if step in ("after-record", "mid-stage", "after-stage"):
        assert text == before
    else:
        assert "Use bun." in text and meta["tags"] == ["tooling"]
    run("update", "--memory-id", res["id"], "--tags", "after-crash")  # the vault still takes writes


def test_a_one_note_update_writes_no_journal_record(vault_path, monkeypatch):
    """Its swap is its commit point (``Transaction._commit_one_note``): no record, no backup, two fsyncs
    like a new note's, not eight. Before, the record and the backup were on disk when the note was swapped."""
    from hive_brain.config import resolve
    from hive_brain.store import journal
    from hive_brain.store.vault import open_vault

    res = remember("Package manager", "Use pnpm.")
    jdir = open_vault(resolve()).state / "journal"
    seen: list[list[str]] = []

    def look(paths):
        seen.append(sorted(p.name for p in jdir.rglob("*")) if jdir.is_dir() else [])

    monkeypatch.setattr(journal, "before_rename", look)
    fsyncs = count_calls(monkeypatch, os, "fsync")
    remember("Commit style", "Imperative mood.")
    new_note = fsyncs[0]
    seen.clear()
    run("update", "--memory-id", res["id"], "--tags", "tooling")
    assert seen == [[]], "a record or backup was written for a one-note update"
    assert fsyncs[0] - new_note == new_note, "a one-note update fsyncs more than a new note"
    assert "tooling" in (vault_path / res["path"]).read_text(encoding="utf-8")
    fsyncs[0] = 0
    from hive_brain.engine import Engine

    eng = Engine.open()
    eng.memory.publish = None  # the note's own writes only, not the index's
    eng.memory.update(res["id"], tags=["tooling", "again"])
    assert fsyncs[0] == 2


WRITER = """
import sys
from hive_brain.engine import Engine
from hive_brain.memory.model import MemoryInput
eng = Engine.open()
w = int(sys.argv[1])
for i in range(25):
    eng.memory.remember(MemoryInput(type="fact", title=f"writer {w} fact {i}", content=f"Writer {w} recorded fact {i}."))
"""


def test_eight_concurrent_writers_lose_nothing(vault_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w)], stderr=subprocess.PIPE, text=True) for w in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    notes = _notes(vault_path)
    assert len(notes) == 200
    keys = [m["memory_key"] for m in notes.values()]
    assert len(set(keys)) == 200


def test_lock_timeout_names_holder(vault_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time\nfrom hive_brain.engine import Engine\nfrom hive_brain.store.lock import vault_lock\n"
         "e=Engine.open()\nwith vault_lock(e.vault.state, command='test-holder'):\n  print('held', flush=True)\n  time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        env_timeout = {"HIVE_BRAIN_LOCK_TIMEOUT": "0.3"}
        os.environ.update(env_timeout)
        try:
            res = run("remember", "--type", "fact", "--title", "x", "--content", "y", ok=False)
        finally:
            del os.environ["HIVE_BRAIN_LOCK_TIMEOUT"]
        # The write is not refused but kept pending (the spec's promise), saying who held the lock.
        assert res["_exit"] == 0 and res["status"] == "pending" and res["id"].startswith("pw-")
        assert f"pid {holder.pid}" in res["message"] and "test-holder" in res["message"]
    finally:
        holder.kill()
        holder.wait()
    # The OS released the dead holder's lock; the next write applies the pending one first.
    after = remember("after", "lock released")
    titles = {m["title"] for m in _notes(vault_path).values()}
    assert titles == {"x", "after"} and after["status"] == "created"


def test_torn_journal_record_is_discarded(vault_path):
    from hive_brain.engine import Engine

    eng = Engine.open()
    jdir = eng.vault.state / "journal"
    jdir.mkdir(parents=True, exist_ok=True)
    (jdir / "deadbeef.json").write_text('{"id": "deadbeef", "sta')
    doc = doctor()
    assert doc["recovered"][0]["action"] == "discarded"
    assert not any(jdir.iterdir())
    assert json.dumps(doc)
