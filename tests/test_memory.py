from __future__ import annotations

import json

from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.store.notes import parse_text

from .helpers import doctor, remember, run


def test_remember_writes_typed_note(vault_path):
    r = remember("Package manager", "Use pnpm, never npm.", "preference", "--tags", "js,tooling", "--project", "web")
    note = parse_text(r["path"], (vault_path / r["path"]).read_text())
    m = note.meta
    assert r["path"].startswith("Memory/Distillations/Agent Memory/")
    assert m["id"] == r["id"] and m["type"] == "preference" and m["status"] == "active"
    assert m["memory_key"] == "preference/web/package-manager"
    assert m["tags"] == ["js", "tooling"] and m["layer"] == "shared" and m["origin"] == "user"
    assert note.body.strip() == "Use pnpm, never npm."


def test_duplicate_key_points_at_evolve(vault_path):
    r = remember("Package manager", "Use pnpm.")
    bad = run("remember", "--type", "preference", "--title", "Package manager", "--content", "Use yarn.", ok=False)
    assert bad["_exit"] == 1 and bad["error"] == "DuplicateKey" and "evolve" in bad["hint"] and r["id"] in bad["message"]


def test_exact_duplicate_content_blocked(vault_path):
    remember("A", "Same words here.")
    bad = run("remember", "--type", "fact", "--title", "B", "--content", "Same   words here.", ok=False)
    assert bad["error"] == "DuplicateContent"


def test_secret_refused_and_never_echoed(vault_path):
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"
    res = CliRunner().invoke(main, ["remember", "--type", "fact", "--title", "key", "--content", f"the key is {secret}"])
    assert res.exit_code == 1 and "secret" in res.output and secret not in res.output
    assert not list((vault_path / "Memory/Distillations/Agent Memory").glob("*.md"))


def test_evolve_then_get_old_shows_superseded_chain(vault_path):
    old = remember("Package manager", "Use pnpm.")
    new = run("evolve", "--memory-id", old["id"], "--content", "Use bun now.")
    got = run("get", "--memory-id", old["id"])
    assert got["meta"]["status"] == "superseded" and got["meta"]["superseded_by"] == new["id"]
    head = run("get", "--memory-id", new["id"])
    assert head["meta"]["supersedes"] == old["id"] and head["meta"]["status"] == "active"
    assert [x["id"] for x in head["chain"]] == [old["id"], new["id"]]
    # Evolving a superseded version is refused; the head can evolve again.
    assert run("evolve", "--memory-id", old["id"], "--content", "x y z", ok=False)["_exit"] == 1


def test_delete_chain_member_needs_force(vault_path):
    old = remember("Package manager", "Use pnpm.")
    new = run("evolve", "--memory-id", old["id"], "--content", "Use bun now.")
    bad = run("delete", "--memory-id", old["id"], "--confirm", ok=False)
    assert bad["error"] == "ChainProtected"
    assert run("delete", "--memory-id", old["id"], ok=False)["error"] == "NotConfirmed"
    run("delete", "--memory-id", old["id"], "--confirm", "--force")
    head = run("get", "--memory-id", new["id"])
    assert head["meta"].get("supersedes") is None and len(head["chain"]) == 1
    assert run("get", "--memory-id", old["id"], ok=False)["error"] == "NotFound"


def test_update_in_place_keeps_unknown_keys(vault_path):
    r = remember("Editor", "Use neovim.")
    p = vault_path / r["path"]
    p.write_text(p.read_text().replace("status: active", "status: active\ncssclasses:\n- wide"))
    run("update", "--memory-id", r["id"], "--content", "Use neovim with lazy.nvim.", "--tags", "editor")
    note = parse_text(r["path"], p.read_text())
    assert note.meta["cssclasses"] == ["wide"] and note.meta["tags"] == ["editor"]
    assert "lazy.nvim" in note.body
    run("update", "--memory-id", r["id"], "--status", "archived")
    assert run("get", "--memory-id", r["id"])["meta"]["status"] == "archived"


def test_batch_all_or_nothing(vault_path, tmp_path):
    good = [{"type": "fact", "title": f"Fact {i}", "content": f"Fact number {i} is true."} for i in range(3)]
    f = tmp_path / "b.json"
    f.write_text(json.dumps(good))
    res = run("batch", "--file", str(f))
    assert res["count"] == 3 and all(r["status"] == "ok" for r in res["records"])
    bad = [
        {"type": "fact", "title": "New one", "content": "A new fact."},
        {"type": "fact", "title": "Leak", "content": "password = hunter2hunter2"},
        {"type": "fact", "title": "Fact 0", "content": "duplicate key"},
    ]
    f.write_text(json.dumps(bad))
    res = run("batch", "--file", str(f), ok=False)
    assert res["_exit"] == 1
    assert [r["status"] for r in res["records"]] == ["ok", "refused", "refused"]
    assert len(list((vault_path / "Memory/Distillations/Agent Memory").glob("*.md"))) == 3
    f.write_text(json.dumps([good[0]] * 26))
    assert run("batch", "--file", str(f), ok=False)["_exit"] == 2
    f.write_text("{not json")
    assert run("batch", "--file", str(f), ok=False)["_exit"] == 2


def test_broken_notes_reported_never_rewritten(vault_path):
    mem = vault_path / "Memory/Distillations/Agent Memory"
    broken = mem / "broken.md"
    broken.write_text("---\nid: mem-x\ntype: fact\ntitle: [oops\n---\nbody\n")
    (vault_path / "Projects/image.md").write_bytes(b"\x89PNG\x00\x00\x00")
    (vault_path / "Projects/latin1.md").write_bytes(b"caf\xe9")
    before = broken.read_bytes()
    remember("Still works", "Writes go on despite broken notes.")
    doc = doctor()
    paths = {p["path"]: p["problem"] for p in doc["problems"]}
    assert "broken YAML" in paths["Memory/Distillations/Agent Memory/broken.md"]
    assert "binary" in paths["Projects/image.md"]
    assert "Projects/latin1.md" not in paths  # read with the CP-1252 fallback now (test_notes)
    assert broken.read_bytes() == before


def test_empty_agent_id_rejected(vault_path, monkeypatch):
    monkeypatch.setenv("HIVE_AGENT_ID", "  ")
    res = run("remember", "--type", "fact", "--title", "x", "--content", "y", ok=False)
    assert res["_exit"] == 2 and res["error"] == "InvalidAgentId"


def test_agent_writes_private_layer(vault_path, monkeypatch):
    monkeypatch.setenv("HIVE_AGENT_ID", "codex")
    r = remember("Flaky test", "test_sync is flaky under load; rerun once.", "lesson")
    assert r["path"].startswith("Agents/codex/Memory/") and r["layer"] == "private"
    shared = remember("Team rule", "Squash merge only.", "instruction", "--memory-scope", "hive")
    assert shared["layer"] == "shared"


def test_title_path_escape_is_contained(vault_path):
    r = remember("../../../etc/passwd", "not a path")
    assert (vault_path / r["path"]).resolve().is_relative_to(vault_path / "Memory")


def test_no_vault_error_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["get", "--memory-id", "x"])
    assert res.exit_code == 1 and "hive-brain init" in res.output
