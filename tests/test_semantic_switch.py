"""A process with another semantic setting than the one that built the index (a server started in a
shell with HIVE_BRAIN_SEMANTIC=0, a machine without the model) catches up what changed, not every note,
and neither forces a full pass on the other (issue 26: 13.5 s at 10k notes instead of 0.56 s)."""

from __future__ import annotations

from hive_brain.config import resolve
from hive_brain.engine import Engine
from hive_brain.store.journal import write_session

from .helpers import remember


def _catch_up(eng: Engine) -> dict:
    with write_session(eng.vault, timeout=10, command="test"):
        return eng.indexer.catch_up(label="test")


def test_a_semantic_off_process_catches_up_without_reindexing_and_keeps_the_vector_queue(vault_path, with_model,
                                                                                         monkeypatch):
    for i in range(4):
        remember(f"Trip {i}", f"We travelled by train number {i} through the mountains.", "fact")
    on = Engine.from_settings(resolve())
    on.rebuild()
    pack = on.indexer.pack_key
    assert pack is not None and on.indexer.pending_count() == 0

    monkeypatch.setenv("HIVE_BRAIN_SEMANTIC", "0")
    off = Engine.from_settings(resolve())
    res = _catch_up(off)
    assert res["changed"] is False, res  # before: a full pass over every note
    (vault_path / "Ideas").mkdir(exist_ok=True)
    (vault_path / "Ideas" / "Boat.md").write_text("# Boat\n\nA sailing boat crossing the ocean.\n")
    res = _catch_up(off)
    assert res["changed"] and not res["full"] and res["indexed"] == 1
    g = off.indexer.gens.load(res["generation"])
    assert g.index["pack"] == pack  # carried over: the queue is kept for the index's pack
    assert off.indexer.pending_count() > 0  # the new note's passages wait for whoever embeds

    monkeypatch.delenv("HIVE_BRAIN_SEMANTIC")
    back = Engine.from_settings(resolve())
    res = _catch_up(back)
    assert res["changed"] is False, res  # and no full pass the other way either
    back.indexer.embed_pending(chunk=8, max_seconds=0.0, lock_timeout=5.0)
    hit = back.recall("sailing boat on the sea", semantic=True, scope="full-vault")["hits"][0]
    assert hit["path"] == "Ideas/Boat.md" and hit["scoreDetails"]["semantic"] is not None
