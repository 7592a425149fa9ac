"""CLI conventions a user expects (llm, sqlite-utils, git): settings that outlive a shell, positional
ids and folders, clear refusals, exit codes scripts can test, NO_COLOR."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main

from .helpers import remember, run


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_config_set_outlives_the_shell_and_keeps_the_users_lines(tmp_path, monkeypatch):
    cfg = tmp_path / "home" / ".config" / "hive-brain" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("# my settings\nhook_deadline = 2.0  # slow laptop\n\n[extra]\nx = 1\n")
    vault = tmp_path / "brain"
    assert _cli("init", str(vault)).exit_code == 0
    res = run("config", "set", "vault", str(vault))
    assert res["value"] == str(vault.resolve()) and "warning" not in res
    text = cfg.read_text()
    assert "# my settings" in text and "# slow laptop" in text and "[extra]" in text
    assert text.index("vault =") < text.index("[extra]")  # a top-level key, not one of [extra]
    # A fresh process with no HIVE_BRAIN_VAULT now finds the vault from anywhere.
    remember("Editor", "The team edits in helix.")
    got = run("config", "get", "vault")
    assert got["source"].startswith("config:") and got["value"] == str(vault.resolve())
    listed = {r["key"]: r for r in run("config", "list")["settings"]}
    assert listed["hook_deadline"]["value"] == 2.0 and listed["semantic"]["source"] == "default"
    run("config", "set", "semantic", "false")
    assert run("config", "get", "semantic")["value"] is False
    run("config", "unset", "semantic")
    assert run("config", "get", "semantic") == {"key": "semantic", "value": True, "source": "default"}
    bad = run("config", "set", "colour", "red", ok=False)
    assert bad["_exit"] == 2 and "unknown setting" in bad["message"]
    assert run("config", "set", "owner_key", "/x", ok=False)["_exit"] == 2  # proofs never live in the file
    warn = run("config", "set", "vault", str(tmp_path / "not-a-vault"))
    assert "hive-brain init" in warn["warning"]


def test_hooks_install_without_a_vault_refuses_and_says_how(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run("hooks", "install", "--agent", "claude-code", ok=False)
    assert res["_exit"] == 1 and res["error"] == "VaultNotFound" and "config set vault" in res["hint"]
    assert not (tmp_path / "home" / ".claude" / "settings.json").exists()


def test_positional_ids_and_folders_with_the_options_kept(vault_path):
    mid = remember("Package manager", "Use pnpm, never npm.")["id"]
    assert run("get", mid)["id"] == mid
    assert run("get", "--memory-id", mid)["id"] == mid
    two = run("get", mid, "--memory-id", "mem-other", ok=False)
    assert two["_exit"] == 2 and "two different" in two["message"]
    none = run("get", ok=False)
    assert none["_exit"] == 2 and "which memory" in none["message"]
    assert run("update", mid, "--tags", "js")["id"] == mid
    assert "Package manager" in run("browse", "Memory")["summary"]
    assert run("delete", mid, "--confirm")["id"] == mid


def test_an_empty_question_is_a_usage_error(vault_path):
    for cmd in ("recall", "answer"):
        res = run(cmd, "   ", ok=False)
        assert res["_exit"] == 2 and "empty" in res["message"]


def test_exit_status_tells_a_script_that_nothing_was_found(vault_path):
    remember("Package manager", "Use pnpm for JavaScript projects, never npm.")
    found = _cli("recall", "which package manager do we use?", "--exit-status", "--json")
    assert found.exit_code == 0 and json.loads(found.output)["hits"]
    missing = _cli("recall", "how does photosynthesis work in ferns?", "--exit-status", "--json")
    assert missing.exit_code == 3 and json.loads(missing.output)["abstained"]
    assert _cli("recall", "how does photosynthesis work in ferns?").exit_code == 0  # without the flag: 0
    assert _cli("answer", "how does photosynthesis work in ferns?", "--exit-status").exit_code == 3


def test_init_refuses_to_nest_a_vault(tmp_path):
    outer = tmp_path / "brain"
    assert _cli("init", str(outer)).exit_code == 0
    nested = _cli("init", str(outer / "Projects" / "inner"), "--json")
    assert nested.exit_code == 1 and "inside the vault" in json.loads(nested.output)["message"]
    assert not (outer / "Projects" / "inner" / ".hive-brain").exists()
    assert _cli("init", str(outer)).exit_code == 0  # the same vault again: fine, idempotent
    assert _cli("init", str(outer / "Projects" / "inner"), "--force").exit_code == 0


def test_no_color_and_NO_COLOR_print_no_escape_codes(vault_path):
    remember("Package manager", "Use pnpm for JavaScript projects, never npm.")
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    colored = subprocess.run([sys.executable, "-m", "hive_brain", "recall", "package manager"], capture_output=True,
                             text=True, env=env, timeout=120)
    assert "\x1b[" in colored.stdout  # the check below can fail
    for extra_env, before, after in (({"NO_COLOR": "1"}, [], []), ({}, ["--no-color"], []), ({}, [], ["--no-color"])):
        p = subprocess.run([sys.executable, "-m", "hive_brain", *before, "recall", "package manager", *after],
                           capture_output=True, text=True, env={**env, **extra_env}, timeout=120)
        assert p.returncode == 0 and "pnpm" in p.stdout and "\x1b[" not in p.stdout, (before, after, p.stdout[:200])
    # After any command's name, as people type it (it was "No such option").
    assert _cli("status", "--no-color").exit_code == 0


def test_batch_messages_count_records_from_one(vault_path):
    import json as _json

    records = [{"type": "fact", "title": "Fine", "content": "A fine record."},
               {"type": "fact", "title": "Bad", "content": "token sk_live_abcdefghijklmnopqrstuvwx"}]
    res = CliRunner().invoke(main, ["batch", "--file", "-"], input=_json.dumps(records), catch_exceptions=False)
    assert res.exit_code == 1 and "record 2:" in res.output and "record 1:" not in res.output


def test_an_unknown_memory_type_is_refused_with_the_valid_ones(vault_path, monkeypatch):
    from hive_brain.memory.model import MEMORY_TYPES

    bad = run("remember", "--type", "prefrence", "--title", "Editor", "--content", "We use helix.", ok=False)
    assert bad["_exit"] == 2 and bad["error"] == "UsageError"
    assert "'preference'" in bad["message"] and all(t in bad["message"] for t in MEMORY_TYPES)
    assert "memory_types" in bad["hint"]
    text = _cli("remember", "--type", "recipe", "--title", "Soup", "--content", "Leek soup.")
    assert text.exit_code == 2 and text.output.count("\n") == 1 and "valid types:" in text.output
    assert not list(vault_path.rglob("Soup*.md"))  # nothing written
    # batch: the record is named (from 1), nothing is written
    recs = [{"type": "fact", "title": "Port", "content": "API on 8443."},
            {"type": "factoid", "title": "DB", "content": "Postgres 16."}]
    res = CliRunner().invoke(main, ["batch", "--file", "-"], input=json.dumps(recs), catch_exceptions=False)
    assert res.exit_code == 1 and "record 2: unknown memory type 'factoid'" in res.output
    # Case and spaces are forgiven; a type the user adds through config is accepted.
    assert remember("Port", "API on 8443.", " Fact ")["id"]
    monkeypatch.setenv("HIVE_BRAIN_MEMORY_TYPES", "recipe, runbook")
    assert remember("Soup", "Leek soup.", "recipe")["id"]


def test_hand_written_notes_of_any_type_are_indexed_and_evolve_keeps_their_type(vault_path):
    (vault_path / "Memory" / "Distillations" / "Agent Memory" / "Gadget.md").write_text(
        "---\nid: mem-hand-1\ntype: gizmo\ntitle: Gadget\nstatus: active\n---\n\nThe zorbulator gadget lives in the attic.\n")
    hits = run("recall", "zorbulator gadget", "--lexical")["hits"]
    assert hits and hits[0]["title"] == "Gadget"
    new = run("evolve", "mem-hand-1", "--content", "The zorbulator gadget moved to the garage.")
    assert run("get", new["id"])["meta"]["type"] == "gizmo"


# Text a person reads must not show a Python repr: a dict, a list of dicts, a quoted key.
_REPRS = ("{'", "': ", "[{", "['", "{\"", "\": ")


def test_text_output_is_for_people_never_a_python_repr(vault_path, tmp_path, monkeypatch):
    """Every read/report command's text output on a small vault, including after a rebuild with the
    model and with problems to report (a broken note, a sync copy)."""
    monkeypatch.setenv("HIVE_BRAIN_MODEL_DIR", "/nonexistent")  # rebuild without a model: the 'off' wording
    mem = remember("Hosting", "The web app runs on Fly.io.", "decision")
    remember("Package manager", "Use pnpm, never npm.", "preference", "--tags", "js,tooling")
    run("evolve", mem["id"], "--content", "The web app moved to Render.")
    for task in ("T-1", "T-2", "T-3"):
        run("record-operation", "--title", "Deploy failed: lock", "--content", "Retried.", "--operation-key",
            "deploy.web", "--failure-key", "db.lock", "--outcome", "failure", "--task-id", task)
    run("record-usage", "--memory-ids", mem["id"], "--kind", "retrieved")
    mem_dir = vault_path / "Memory" / "Distillations" / "Agent Memory"
    (mem_dir / "Broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n")
    first = next(p for p in mem_dir.glob("hosting*.md"))
    (mem_dir / (first.stem + ".sync-conflict-20260101-000000-ABC.md")).write_text(first.read_text())
    (tmp_path / "transcripts").mkdir()
    commands = [
        ["rebuild-index"], ["rebuild-index", "--lexical-only"], ["status"], ["doctor"], ["generations"],
        ["compare", "where is the web app hosted", "--from-generation", "1"], ["mine-patterns"], ["health"], ["conflicts"],
        ["repair-conflicts"], ["review", "list"], ["get", mem["id"]], ["recall", "web app hosting"],
        ["answer", "where is the web app hosted?"], ["browse"], ["browse", "Memory"], ["replay", "web app", "--generation", "1"],
        ["generations", "--prune", "--keep", "2"], ["model", "status"], ["config", "list"], ["hooks", "status"], ["core"],
        ["consolidate", "--from-dir", str(tmp_path / "transcripts")],
    ]
    seen, wrong = {}, []
    for args in commands:
        res = _cli(*args)
        seen[" ".join(args)] = res.output
        if res.exit_code not in (0, 1) or any(r in res.output for r in _REPRS):
            wrong.append(f"$ hive-brain {' '.join(args)}  (exit {res.exit_code})\n{res.output}")
    assert not wrong, "\n".join(wrong)
    assert "passages: lexical" in seen["rebuild-index"]


def test_a_type_added_to_the_config_counts_for_a_store_that_started_before(vault_path):
    from hive_brain.engine import Engine
    from hive_brain.errors import UsageError
    from hive_brain.memory.model import MemoryInput

    store = Engine.open().memory  # as the server's: settings resolved at its start
    with pytest.raises(UsageError, match="config set memory_types recipe"):
        store.remember(MemoryInput(type="recipe", title="Soup", content="Leek soup."))
    run("config", "set", "memory_types", "recipe,runbook")
    assert store.remember(MemoryInput(type="Runbook", title="Deploy", content="Run make deploy."))["id"]
