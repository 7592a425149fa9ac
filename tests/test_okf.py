"""Open Knowledge Format v0.1 export and validation (memory/okf.py, cli/okf.py): real vaults, real files,
and a real server process for the default bundle's pruning."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.memory.okf import MANIFEST, ignored
from hive_brain.store.vault import OKF_EXPORT_DIR

from .helpers import remember, run

SECRET = "ghp_" + "Q7x9Lm2Kp4Rt8Wv3Zn6Bc1Df5Gh0Jk7Ms2Pq"


def _bundle(vault: Path) -> Path:
    return vault / OKF_EXPORT_DIR


def _concepts(root: Path) -> dict[str, dict]:
    """concept id -> frontmatter of every concept file in a bundle."""
    out = {}
    for p in sorted(root.rglob("*.md")):
        if p.name in ("index.md", "log.md"):
            continue
        text = p.read_text(encoding="utf-8")
        out[p.relative_to(root).as_posix()[:-3]] = yaml.safe_load(text.split("---\n")[1])
    return out


def _by_resource(root: Path) -> dict[str, str]:
    return {fm["resource"]: cid for cid, fm in _concepts(root).items()}


def _hand_memory(vault: Path, name: str, mid: str, title: str, body: str, **extra: str) -> None:
    meta = {"id": mid, "type": "fact", "title": title, "status": "active", "origin": "user", **extra}
    fm = yaml.safe_dump(meta, sort_keys=False)
    (vault / "Memory/Distillations/Agent Memory" / name).write_text(f"---\n{fm}---\n\n{body}\n", encoding="utf-8")


def _snapshot(vault: Path) -> dict[str, str]:
    """sha256 of every file in the vault outside the bundle (and our marker folder)."""
    out = {}
    for p in vault.rglob("*"):
        rel = p.relative_to(vault).as_posix()
        if p.is_file() and not rel.startswith((OKF_EXPORT_DIR + "/", ".hive-brain/")):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_export_takes_shared_current_notes_only_and_is_conformant(vault_path):
    kept = remember("Deploy window", "Deploys happen on Tuesday mornings.", "decision")["id"]
    old = remember("Cache size", "The cache holds 2 GB.", "fact")["id"]
    new = run("evolve", old, "--content", "The cache holds 4 GB since the upgrade.")["id"]
    archived = remember("Old linter", "We lint with flake8.", "instruction")["id"]
    run("update", archived, "--status", "archived")
    private = remember("Bob's shortcut", "Bob greps the logs first.", "lesson", agent="bob")["id"]
    task = run("--agent", "bob", "remember", "--type", "fact", "--title", "Ticket scratch", "--content",
               "Half-done notes for T-1.", "--memory-scope", "task", "--task", "T-1")["id"]
    # A hand-written note holding a secret (remember refuses them; a person's edit may not).
    _hand_memory(vault_path, "api-access-handab.md", "mem-handwrittenab", "API access",
                 f"Call the API with {SECRET} as the bearer token.")
    conv = vault_path / "Memory/Conversations/claude"
    conv.mkdir(parents=True)
    (conv / "fix-the-build-c0ffee.md").write_text(
        "---\ntype: conversation\ntitle: Fix the build\ndate: 2026-11-20T10:00:00Z\nagent: claude\n"
        "session_id: 11111111-2222-3333-4444-55555555c0ff\n---\n\n# Fix the build\n\n## Turn 1\n\n"
        "**User:** the build is red since the upgrade\n\n**Assistant:** pinned the compiler.\n", encoding="utf-8")
    before = _snapshot(vault_path)

    res = run("okf", "export")
    root = _bundle(vault_path)
    assert res["valid"] and res["problems"] == [] and res["default"] and Path(res["output"]) == root
    found = _by_resource(root)
    assert set(found) == {f"hive-brain:memory/{m}" for m in (kept, new, "mem-handwrittenab")}, found
    for gone in (old, archived, private, task):
        assert f"hive-brain:memory/{gone}" not in found
    assert _snapshot(vault_path) == before  # the export changed no other file
    text = "".join(p.read_text(encoding="utf-8") for p in root.rglob("*") if p.is_file())
    assert SECRET not in text and "[redacted" in text
    assert "Bob greps" not in text and "Half-done" not in text and "flake8" not in text

    fm = _concepts(root)[found[f"hive-brain:memory/{kept}"]]
    assert fm["type"] == "Decision" and fm["title"] == "Deploy window"
    assert fm["description"] == "Deploys happen on Tuesday mornings."
    assert fm["timestamp"].endswith("Z") and fm["source_note"].startswith("Memory/Distillations/Agent Memory/")
    index = (root / "index.md").read_text(encoding="utf-8")
    assert index.startswith('---\nokf_version: "0.1"\n---\n') and "[Deploy window](agent-memory/" in index
    assert run("okf", "validate", str(root))["ok"] is True

    # Conversations only when asked for; outside the vault, a bundle of its own.
    out = vault_path.parent / "okf-all"
    res = run("okf", "export", "--include", "all", "--output", str(out))
    assert res["valid"] and not res["default"]
    convs = [fm for cid, fm in _concepts(out).items() if cid.startswith("conversations/")]
    assert [c["type"] for c in convs] == ["Conversation"] and convs[0]["description"] == "the build is red since the upgrade"
    assert len(_concepts(out)) == 4


def test_file_names_are_stable_and_notes_sharing_a_title_keep_their_own(vault_path):
    a = remember("Database", "Postgres for orders.", "decision", "--project", "shop")["id"]
    b = remember("Database", "ClickHouse for analytics.", "decision", "--project", "stats")["id"]
    first = run("okf", "export")
    root = _bundle(vault_path)
    names = _by_resource(root)
    assert names[f"hive-brain:memory/{a}"] != names[f"hive-brain:memory/{b}"]
    assert all(cid.startswith("agent-memory/database-") for cid in names.values())
    assert first["written"] == 2

    remember("Editor", "Use the project's .editorconfig.", "instruction")
    second = run("okf", "export")
    again = _by_resource(root)
    assert {k: again[k] for k in names} == names  # same files for the same notes
    assert second["written"] == 1 and second["unchanged"] == 2 and second["removed"] == []


def test_archiving_removes_its_concept_at_the_next_export(vault_path):
    keep = remember("Branching", "Trunk-based, short-lived branches.", "decision")["id"]
    drop = remember("Code owners", "Alice owns the billing module.", "fact")["id"]
    run("okf", "export")
    root = _bundle(vault_path)
    dropped = _by_resource(root)[f"hive-brain:memory/{drop}"]
    run("update", drop, "--status", "archived")
    res = run("okf", "export")
    assert res["removed"] == [dropped + ".md"]
    assert set(_by_resource(root)) == {f"hive-brain:memory/{keep}"}
    assert "Code owners" not in (root / "index.md").read_text(encoding="utf-8")
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    assert list(manifest["concepts"]) == [_by_resource(root)[f"hive-brain:memory/{keep}"] + ".md"]


def test_output_rules_and_clean(vault_path, tmp_path):
    remember("Style", "Black, line length 110.", "preference")
    inside = _cli("okf", "export", "--output", str(vault_path / "Projects" / "okf"), "--json")
    assert inside.exit_code == 2 and "inside the vault" in inside.output
    assert not (vault_path / "Projects" / "okf").exists()

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    refused = _cli("okf", "export", "--output", str(foreign), "--json")
    assert refused.exit_code == 1 and "not empty" in refused.output
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]

    out = tmp_path / "bundle"
    run("okf", "export", "--output", str(out))
    (out / "stray.md").write_text("no frontmatter here\n")
    kept = run("okf", "export", "--output", str(out))
    assert (out / "stray.md").exists() and kept["valid"] is False  # not ours: left alone, and reported
    cleaned = run("okf", "export", "--output", str(out), "--clean")
    assert cleaned["removed"] == ["stray.md"] and cleaned["valid"] and not (out / "stray.md").exists()


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


GOOD = "---\ntype: Playbook\ntitle: Restart\ndescription: How to restart.\n---\n\n# Steps\n"


def test_validate_rejects_a_missing_type_and_reserved_names_used_as_concepts(tmp_path):
    ok = _write(tmp_path / "ok", {
        "index.md": '---\nokf_version: "0.1"\n---\n\n# Runbooks\n\n* [Restart](runbooks/restart.md) - How.\n',
        "runbooks/restart.md": GOOD, "runbooks/index.md": "# Runbooks\n",
        "log.md": "# Log\n\n## 2026-05-22\n* **Creation**: runbooks.\n",
        "README.md": "A readme, listed in .okfignore.\n", ".okfignore": "# not concepts\nREADME.md\n",
        ".git/notes.md": "not part of the bundle\n",
    })
    res = run("okf", "validate", str(ok))
    assert res["ok"] is True and res["concepts"] == 1 and res["errors"] == []

    cases = {
        "missing type": ({"a.md": "---\ntitle: No type\n---\nbody\n"}, "a.md", "no non-empty `type`"),
        "empty type": ({"a.md": "---\ntype: ''\n---\nbody\n"}, "a.md", "no non-empty `type`"),
        "no frontmatter": ({"a.md": "# Just text\n"}, "a.md", "must start with YAML frontmatter"),
        "broken yaml": ({"a.md": "---\ntype: [x\n---\n"}, "a.md", "does not parse"),
        "index.md as a concept": ({"sub/index.md": GOOD}, "sub/index.md", "reserved name"),
        "root index.md as a concept": ({"index.md": GOOD}, "index.md", "reserved name"),
        "log.md as a concept": ({"log.md": GOOD}, "log.md", "reserved name"),
        "extra key in root index": ({"index.md": '---\nokf_version: "0.1"\ntitle: x\n---\n'}, "index.md",
                                    "only `okf_version`"),
        "log.md bad date": ({"log.md": "# Log\n\n## May 22\n* x\n"}, "log.md", "not YYYY-MM-DD"),
    }
    for name, (files, path, problem) in cases.items():
        bundle = _write(tmp_path / name.replace(" ", "-"), {"good.md": GOOD, **files})
        res = CliRunner().invoke(main, ["okf", "validate", str(bundle), "--json"], catch_exceptions=False)
        assert res.exit_code == 1, name
        data = json.loads(res.output)
        assert data["ok"] is False and [e["path"] for e in data["errors"]] == [path], (name, data)
        assert problem in data["errors"][0]["problem"], (name, data)
        human = CliRunner().invoke(main, ["okf", "validate", str(bundle)], catch_exceptions=False)
        assert human.exit_code == 1 and "NOT conformant" in human.output and path in human.output

    missing = CliRunner().invoke(main, ["okf", "validate", str(tmp_path / "nope"), "--json"])
    assert missing.exit_code == 2


def test_okfignore_patterns_follow_the_spec_subset():
    assert ignored("README.md", ["README.md"]) and ignored("docs/README.md", ["README.md"])
    assert ignored("README.md", ["/README.md"]) and not ignored("docs/README.md", ["/README.md"])
    assert ignored("a/b/c/notes.md", ["a/**/notes.md"]) and ignored("a/notes.md", ["a/**/notes.md"])
    assert ignored("drafts/x.md", ["drafts/*.md"]) and not ignored("drafts/deep/x.md", ["drafts/*.md"])
    assert ignored("x1.md", ["x?.md"]) and not ignored("x12.md", ["x?.md"])


def test_exported_copies_are_not_indexed_twice(vault_path):
    remember("Rollback", "Rollbacks use the zebrafallback script.", "procedure")
    run("okf", "export")
    hits = run("recall", "zebrafallback", "--scope", "full-vault", "--include-operational")["hits"]
    assert [h["path"] for h in hits] == [h["path"] for h in hits if not h["path"].startswith(OKF_EXPORT_DIR)]
    assert len(hits) == 1
    assert run("status")["staleNotes"] == 0


def test_the_server_prunes_the_default_bundle(vault_path, tmp_path):
    from hive_brain.rpc import client

    from .test_server import START_TIMEOUT, _serve, _state, _stop, _wait_for

    keep = remember("Ports", "The API listens on 8443.", "fact")["id"]
    archive = remember("Staging host", "Staging runs on stg-3.", "fact")["id"]
    replace = remember("Timeout", "Requests time out after 30 s.", "fact")["id"]
    delete = remember("Mascot", "The team mascot is a capybara.", "fact")["id"]
    run("okf", "export")
    root = _bundle(vault_path)
    files = {mid: root / (_by_resource(root)[f"hive-brain:memory/{mid}"] + ".md")
             for mid in (keep, archive, replace, delete)}
    proc = _serve(tmp_path)
    try:
        client.wait_ready(_state(), START_TIMEOUT, proc=proc)
        assert all(p.exists() for p in files.values())  # nothing to prune at start
        run("update", archive, "--status", "archived")  # a write through the server
        _wait_for(lambda: not files[archive].exists(), 10)
        newer = run("evolve", replace, "--content", "Requests time out after 60 s.")["id"]
        _wait_for(lambda: not files[replace].exists(), 10)
        note = vault_path / run("get", delete)["path"]
        note.unlink()  # a hand deletion: only the watcher sees it
        _wait_for(lambda: not files[delete].exists(), 10)
        assert files[keep].exists()
        assert set(_by_resource(root)) == {f"hive-brain:memory/{keep}"}
        index = (root / "index.md").read_text(encoding="utf-8")
        assert "Ports" in index and "Staging host" not in index and "Timeout" not in index
        # New notes wait for the next export, which the server never runs by itself.
        assert f"hive-brain:memory/{newer}" not in _by_resource(root)
        assert run("okf", "validate", str(root))["ok"]
    finally:
        _stop(proc)
    res = run("okf", "export")
    assert set(_by_resource(root)) == {f"hive-brain:memory/{keep}", f"hive-brain:memory/{newer}"}
    assert res["removed"] == []


def test_derived_status_decides_and_a_moved_note_keeps_its_concept(vault_path):
    from hive_brain.config import resolve
    from hive_brain.engine import Engine
    from hive_brain.memory.okf import prune_default

    # A sync brought an old version back as `active`; the newer note still supersedes it.
    _hand_memory(vault_path, "limit-old.md", "note-limit-1", "Rate limit", "100 requests a minute.")
    _hand_memory(vault_path, "limit-new.md", "note-limit-2", "Rate limit", "500 requests a minute.",
                 supersedes="note-limit-1")
    run("okf", "export")
    root = _bundle(vault_path)
    assert set(_by_resource(root)) == {"hive-brain:memory/note-limit-2"}

    # Moved by hand (same id): still current, so the prune keeps it; deleted: gone.
    mem = vault_path / "Memory/Distillations/Agent Memory"
    (mem / "archive").mkdir()
    (mem / "limit-new.md").rename(mem / "archive" / "limit-new.md")
    eng = Engine.from_settings(resolve())
    eng.catalog.refresh()
    assert prune_default(eng.vault, eng.catalog) == []
    (mem / "archive" / "limit-new.md").unlink()
    eng.catalog.refresh()
    assert len(prune_default(eng.vault, eng.catalog)) == 1
    assert _concepts(root) == {}
    assert "Nothing is exported yet." in (root / "index.md").read_text(encoding="utf-8")
    assert run("okf", "validate", str(root))["ok"]
