"""The index converges to the notes whatever the crash point (issue 16, first defect).

A writer killed between the tantivy commit and the generation publish leaves an index that holds
more (or other) than the published generation says; the next catch-up must notice and reconcile,
even when the note it was indexing is gone by then.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from hive_brain.engine import Engine
from hive_brain.index.indexer import CRASH_POINTS

from .helpers import remember, run

REMEMBER_GHOST = """
from hive_brain.engine import Engine
from hive_brain.memory.model import MemoryInput
Engine.open().memory.remember(MemoryInput(type="fact", title="Zeppelin hangar", content="The zeppelin hangar code is 4711."))
"""


def _remember_killed_before_publish(point: str = "index-before-publish") -> None:
    env = {**os.environ, "HIVE_BRAIN_CRASH_AT": point}
    proc = subprocess.run([sys.executable, "-c", REMEMBER_GHOST], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def _ghost_hits(res: dict) -> list[dict]:
    return [h for h in res["hits"] if "Zeppelin" in (h.get("title") or "") or "zeppelin" in h["path"].lower()]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_note_deleted_after_a_crash_in_the_publish_never_comes_back(vault_path, point):
    remember("Package manager", "Use pnpm for JavaScript projects.")
    _remember_killed_before_publish(point)
    ghosts = list(vault_path.rglob("zeppelin-*.md"))
    assert len(ghosts) == 1  # the note was written; the index committed it; no generation names it
    ghosts[0].unlink()  # deleted before the next catch-up
    for _ in range(2):  # the first catch-up repairs; the next ones must not bring it back
        res = run("recall", "zeppelin hangar code", "--lexical")
        assert _ghost_hits(res) == [], res["hits"]
    remember("Another", "Writes still work.", "fact")
    assert _ghost_hits(run("recall", "zeppelin hangar code", "--lexical")) == []
    eng = Engine.open()
    assert not any("Zeppelin" in p for p in _indexed_paths(eng))


def test_note_changed_back_after_a_crash_before_publish_is_reindexed(vault_path):
    """The crashed catch-up indexed content that no generation has; the note then returns to what
    the generation says. A diff against the manifest sees nothing; the index must still follow."""
    remember("Package manager", "Use pnpm for JavaScript projects.")
    note = next(vault_path.rglob("package-manager-*.md"))
    original = note.read_bytes()
    note.write_bytes(original.replace(b"pnpm", b"yarn"))
    env = {**os.environ, "HIVE_BRAIN_CRASH_AT": "index-before-publish"}
    proc = subprocess.run([sys.executable, "-c", "from hive_brain.engine import Engine; Engine.open().rebuild(embed=False)"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    note.write_bytes(original)
    res = run("recall", "which package manager pnpm", "--lexical")
    assert res["hits"] and res["hits"][0]["path"] == note.relative_to(vault_path).as_posix()
    assert not run("recall", "yarn", "--lexical")["hits"]


def test_ghost_vectors_are_never_embedded(vault_path, with_model):
    remember("Package manager", "Use pnpm for JavaScript projects.")
    Engine.open().indexer.embed_pending()
    _remember_killed_before_publish()
    ghost = next(vault_path.rglob("zeppelin-*.md"))
    rel = ghost.relative_to(vault_path).as_posix()
    # Whoever embeds next (the server, a semantic recall) must not give the ghost vectors, and a
    # catch-up after the note is gone must remove any it got.
    Engine.open().indexer.embed_pending()
    ghost.unlink()
    res = run("recall", "airship shed access number")  # semantic: catches up, embeds what is queued
    assert _ghost_hits(res) == []
    eng = Engine.open()
    eng.indexer.embed_pending()
    assert eng.indexer.vectors.rows_for([rel]) == []
    assert not any("Zeppelin" in p for p in _indexed_paths(eng))


def _indexed_paths(eng: Engine) -> set[str]:
    lex = eng.indexer.reader()
    return {h.note_path for h in lex.search("zeppelin hangar code", limit=50)}


def test_in_flight_record_is_empty_after_every_publish_and_a_damaged_one_means_a_full_pass(vault_path):
    remember("Package manager", "Use pnpm for JavaScript projects.")
    eng = Engine.open()
    record = eng.indexer.dir / "in-flight.json"
    assert record.read_bytes() == b""  # nothing in flight: the next catch-up scans nothing
    (vault_path / "Projects/Deploy.md").write_text("# Deploy\n\nWe deploy with Kamal.\n")
    with eng.memory.transaction("test"):
        res = eng.indexer.catch_up()
    assert res["changed"] and not res["full"] and res["indexed"] == 1
    record.write_bytes(b"\x00garbage{")
    with eng.memory.transaction("test"):
        res = eng.indexer.catch_up()
    assert res["full"] and record.read_bytes() == b""
