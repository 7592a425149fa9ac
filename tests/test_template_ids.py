"""A memory a person makes from the vault's template (Templates/Memory.md) has no id, or a placeholder
its template plugin left: it is a memory all the same, with an id derived from its path that every
device computes alike; the note is never rewritten to add it until hive-brain writes the note anyway."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .helpers import run

MEM = Path("Memory/Distillations/Agent Memory")


def _from_template(vault: Path, name: str, body: str, *, id_line: str | None = None) -> Path:
    tpl = (vault / "Templates" / "Memory.md").read_text()
    assert "\nid:" not in tpl  # the template gives no id: this is the case under test
    text = tpl.replace("What was learned, and why it matters.", body)
    if id_line:
        text = text.replace("---\n", f"---\n{id_line}\n", 1)
    path = vault / MEM / f"{name}.md"
    path.write_text(text)
    return path


def test_a_note_from_the_template_is_a_memory_with_a_stable_id(vault_path, tmp_path, monkeypatch):
    plain = _from_template(vault_path, "Flaky CI cache", "Clear the CI cache when the build fails with ENOSPC.")
    templated = _from_template(vault_path, "Zorbulator restarts", "Restart the zorbulator after each deploy.",
                               id_line='id: "{{date:YYYYMMDDHHmmss}}"')
    before = {p: p.read_bytes() for p in (plain, templated)}
    hit = run("recall", "CI cache ENOSPC", "--lexical")["hits"][0]
    assert hit["path"] == f"{MEM}/Flaky CI cache.md" and hit["kind"] == "memory" and hit["id"].startswith("mem-")
    from hive_brain.store.notes import path_id

    ids = {p: path_id(f"{MEM}/{p.name}") for p in (plain, templated)}
    assert hit["id"] == ids[plain] and len(set(ids.values())) == 2
    got = run("get", ids[templated])
    assert got["meta"]["type"] == "lesson" and "zorbulator" in got["content"]
    run("rebuild-index", "--lexical-only")
    run("doctor")
    assert {p: p.read_bytes() for p in before} == before  # indexing never rewrote a person's note
    # Another device (its own state dir) derives the same ids from the same notes.
    monkeypatch.setenv("HIVE_BRAIN_STATE_DIR", str(tmp_path / "state-laptop"))
    assert run("recall", "CI cache ENOSPC", "--lexical")["hits"][0]["id"] == ids[plain]

    # The first write hive-brain makes to the note records the id in it (the user's lines kept).
    run("update", ids[plain], "--tags", "ci")
    text = plain.read_text()
    assert f"id: {ids[plain]}" in text and "What was learned" not in text and "ENOSPC" in text
    moved = plain.with_name("CI cache.md")
    shutil.move(plain, moved)  # written: a rename no longer changes it
    assert run("get", ids[plain])["path"] == f"{MEM}/CI cache.md"

    # evolve: the old version gets its id written where the placeholder was; the chain holds.
    new = run("evolve", ids[templated], "--content", "Restart the zorbulator after each deploy and each migration.")
    old_text = templated.read_text()
    assert f"id: {ids[templated]}" in old_text and "{{date" not in old_text and "status: superseded" in old_text
    chain = run("get", new["id"])["chain"]
    assert [c["id"] for c in chain] == [ids[templated], new["id"]]
    assert os.environ["HIVE_BRAIN_STATE_DIR"].endswith("state-laptop")


def test_a_sync_copy_of_a_template_note_is_still_reported(vault_path):
    from .helpers import doctor

    note = _from_template(vault_path, "Flaky CI cache", "Clear the CI cache when the build fails with ENOSPC.")
    copy = note.with_name("Flaky CI cache.sync-conflict-20260101-000000-ABCDEFG.md")
    copy.write_text(note.read_text().replace("ENOSPC", "ENOSPC or EDQUOT"))
    found = doctor()["conflicts"]
    assert [(c["kind"], c["path"]) for c in found] == [("syncCopy", f"{MEM}/{copy.name}")]
