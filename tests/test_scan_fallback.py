"""Recall without an index (issue 28): when the index cannot be read — nothing indexed and another
process building it, found damaged while another process holds the lock, a state dir that cannot be
used — recall and answer still answer from the notes by a plain scan, and say so (search/scan.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from tests.helpers import remember, run

DEPLOY = "We deploy the web app with kamal to the hetzner box, after the migrations ran."


def _note(vault: Path, rel: str, body: str, meta: str = "") -> None:
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"---\n{meta}---\n{body}\n" if meta else body + "\n", encoding="utf-8")


def _state(vault: Path) -> Path:
    vid = json.loads((vault / ".hive-brain" / "vault.json").read_text())["vault_id"]
    return Path(os.environ["HIVE_BRAIN_STATE_DIR"]) / vid


@contextmanager
def _lock_held(vault: Path) -> Iterator[None]:
    """Another process holding the vault lock (a rebuild-index, a server's first index)."""
    code = textwrap.dedent(f"""
        import sys, time
        from hive_brain.config import resolve
        from hive_brain.store.lock import vault_lock
        from hive_brain.store.vault import open_vault
        v = open_vault(resolve(vault={str(vault)!r}))
        with vault_lock(v.state, timeout=5, command="rebuild-index"):
            print("held", flush=True)
            sys.stdin.read()
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def _assert_scan_warning(warnings: list[str]) -> None:
    assert any("index is unavailable" in w and "hive-brain rebuild-index" in w for w in warnings), warnings


@pytest.fixture
def deploy_vault(vault_path, monkeypatch) -> Path:
    monkeypatch.setenv("HIVE_BRAIN_LOCK_TIMEOUT", "2")
    _note(vault_path, "Projects/Deploy.md", DEPLOY, "title: Deploy\n")
    _note(vault_path, "Projects/Garden.md", "Tomatoes want sun and a stake.", "title: Garden\n")
    return vault_path


def test_recall_answers_from_the_notes_while_another_process_builds_the_index(deploy_vault):
    """No index yet and the lock taken: recall waited the whole lock timeout, then failed."""
    with _lock_held(deploy_vault):
        res = run("recall", "how do we deploy with kamal")
        code, out, err = _cli("recall", "how do we deploy with kamal")
    assert res["mode"] == "scan" and res["hits"][0]["path"] == "Projects/Deploy.md", res
    assert res["scan"]["why"] == "another process is building it"
    assert "Projects/Garden.md" not in [h["path"] for h in res["hits"]]
    _assert_scan_warning(res["warnings"])
    assert code == 0 and "Projects/Deploy.md" in out and "index is unavailable" in out and "rebuild-index" in out, out
    assert "scan of the notes" in out


def test_answer_builds_its_pack_from_the_scan(deploy_vault):
    with _lock_held(deploy_vault):
        pack = run("answer", "how do we deploy with kamal")
        code, out, err = _cli("answer", "how do we deploy with kamal")
        off = run("answer", "what colour is the neighbour's cat")
    assert not pack["abstained"] and "kamal" in pack["context"], pack
    assert pack["recall"]["mode"] == "scan"
    _assert_scan_warning(pack["recall"]["warnings"])
    assert code == 0 and "kamal" in out and "index is unavailable" in err, (out, err)
    assert off["abstained"], off  # a scan abstains rather than stitch unrelated notes together


def test_recall_answers_when_the_state_dir_cannot_be_used(deploy_vault, tmp_path, monkeypatch):
    """A file where the state dir should be: recall died with a traceback (NotADirectoryError)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("HIVE_BRAIN_STATE_DIR", str(blocker / "state"))
    res = run("recall", "kamal deploy")
    assert res["mode"] == "scan" and [h["path"] for h in res["hits"]] == ["Projects/Deploy.md"], res
    assert "state dir cannot be used" in res["scan"]["why"]
    _assert_scan_warning(res["warnings"])
    ops = run("recall", "kamal deploy", "--include-operational")  # its events live in the state dir too
    assert ops["hits"] and ops["operational"] == [] and any("operational events" in w for w in ops["warnings"])


@pytest.mark.parametrize("where", ["parent", "state"])
@pytest.mark.parametrize("args", [["status"], ["doctor"], ["core"], ["generations", "--prune"],
                                  ["remember", "--type", "fact", "--title", "Port", "--content", "The API listens on 8080."]])
def test_status_doctor_and_writes_name_an_unusable_state_dir_in_one_line(deploy_vault, tmp_path, monkeypatch,
                                                                         where, args):
    """A file where the state dir (or its parent) should be: status, doctor and every command that
    opens the index died with a NotADirectoryError traceback. One line now, naming the path and the fix."""
    blocker = tmp_path / "not-a-dir"
    if where == "parent":
        blocker.write_text("x")
        monkeypatch.setenv("HIVE_BRAIN_STATE_DIR", str(blocker / "state"))
    else:
        monkeypatch.setenv("HIVE_BRAIN_STATE_DIR", str(blocker))
        blocker.mkdir()
        vid = json.loads((deploy_vault / ".hive-brain" / "vault.json").read_text())["vault_id"]
        (blocker / vid).write_text("x")
    code, out, err = _cli(*args)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    assert "state dir cannot be used" in err and "is a file, not a folder" in err and "HIVE_BRAIN_STATE_DIR" in err
    res = run(*args, ok=False)
    assert res["error"] == "StateUnusable" and res["stateDir"].startswith(str(blocker)), res


def test_a_damaged_index_found_while_another_process_holds_the_lock_is_not_an_empty_vault(deploy_vault):
    """The damaged index was moved aside and an empty one read: "nothing relevant found", rc 0, wrong."""
    assert run("recall", "kamal deploy")["hits"]
    (_state(deploy_vault) / "index" / "lexical" / "meta.json").write_text("garbage")
    with _lock_held(deploy_vault):
        res = run("recall", "kamal deploy")
    assert res["mode"] == "scan" and res["hits"] and res["hits"][0]["path"] == "Projects/Deploy.md", res
    _assert_scan_warning(res["warnings"])
    assert run("recall", "kamal deploy").get("mode") != "scan"  # the next catch-up indexes them again


def test_the_prompt_hooks_read_only_view_scans_when_the_index_is_gone(deploy_vault):
    """The generation says notes are indexed but the lexical index is gone: the hook's read-only view
    read an empty in-memory index and found nothing."""
    from hive_brain.agents.hooks import lexical_view
    from hive_brain.config import resolve
    from hive_brain.search.recall import search
    from hive_brain.store.vault import open_vault

    assert run("recall", "kamal deploy")["hits"]
    shutil.rmtree(_state(deploy_vault) / "index" / "lexical")
    settings = resolve()
    view = lexical_view(open_vault(settings), settings)
    res = search(view, "kamal deploy", agent=None, semantic=False)
    assert res["mode"] == "scan" and res["hits"][0]["path"] == "Projects/Deploy.md", res


def test_the_scan_keeps_the_boundaries_the_index_keeps(deploy_vault, monkeypatch):
    """Another agent's private memory, Brain Review proposals and secret values stay out of a scan."""
    remember("Kamal staging", "Kamal deploys staging from the ops branch.", "fact", "--memory-scope", "private",
             agent="agent-a")
    _note(deploy_vault, "Operations/Brain Review/Kamal proposal rev-x.md", "kamal proposal kamal deploy",
          "id: rev-01abc\nkind: remember\nstatus: pending\n")
    key = "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"
    _note(deploy_vault, "Projects/Keys.md", f"The kamal registry password is {key}", "title: Keys\n")
    shutil.rmtree(_state(deploy_vault))
    with _lock_held(deploy_vault):
        owner = run("recall", "kamal", "--limit", "20")
        monkeypatch.setenv("HIVE_AGENT_ID", "agent-b")
        other = run("recall", "kamal", "--limit", "20")
        monkeypatch.setenv("HIVE_AGENT_ID", "agent-a")
        mine = run("recall", "kamal staging ops branch", "--limit", "20")
        by_secret = run("recall", key)
    for res in (owner, other):
        assert res["mode"] == "scan"
        paths = [h["path"] for h in res["hits"]]
        assert "Projects/Deploy.md" in paths, paths
        assert not [p for p in paths if p.startswith(("Agents/", "Operations/"))], paths
    assert any(h["path"].startswith("Agents/agent-a/") for h in mine["hits"]), mine
    assert key not in json.dumps(owner)
    assert not by_secret["hits"], by_secret  # a secret's value is never what a note is found by


def test_user_templates_are_scanned_and_the_shipped_memory_form_is_not(deploy_vault):
    """DESIGN: Templates/ notes are ordinary notes searched by full-vault recall; the index leaves out
    only the typed-memory form the vault ships (Templates/Memory.md). The scan does the same."""
    _note(deploy_vault, "Templates/Incident postmortem.md", "Postmortem: timeline, impact, kamal rollback steps.")
    with _lock_held(deploy_vault):
        res = run("recall", "postmortem timeline", "--limit", "20")
        form = run("recall", "memory type title content confidence", "--limit", "20")
    assert res["hits"][0]["path"] == "Templates/Incident postmortem.md", res["hits"]
    assert "Templates/Memory.md" not in [h["path"] for h in form["hits"]]


@pytest.mark.parametrize("engine", ["python", "ripgrep"])
def test_python_and_ripgrep_scans_find_the_same_notes(deploy_vault, monkeypatch, engine):
    if engine == "ripgrep" and shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not installed here")
    monkeypatch.setenv("HIVE_BRAIN_SCAN_RG", "1" if engine == "ripgrep" else "0")
    _note(deploy_vault, "Projects/Déploiement.md", "Le déploiement passe par kamal.", "title: Déploiement\n")
    _note(deploy_vault, ".obsidian/kamal.md", "kamal kamal kamal")  # not a note: an ignored folder
    with _lock_held(deploy_vault):
        res = run("recall", "kamal", "--limit", "20")
        accents = run("recall", "deploiement")
    assert res["scan"]["engine"] == engine
    assert sorted(h["path"] for h in res["hits"]) == ["Projects/Deploy.md", "Projects/Déploiement.md"], res["hits"]
    if engine == "python":  # ripgrep compares bytes: it cannot fold accents
        assert [h["path"] for h in accents["hits"]] == ["Projects/Déploiement.md"], accents


def test_a_scan_for_typed_memory_is_not_crowded_out_by_notes(deploy_vault):
    """--scope agent-memory and --type are frontmatter facts: eighty notes that say "kamal" more often
    than the one memory filled the notes read again (60), and the memory was not found."""
    for i in range(80):
        _note(deploy_vault, f"Projects/Log {i}.md", "kamal " * 20 + f"run {i}")
    remember("Kamal secrets", "Kamal reads its secrets from .kamal/secrets.", "fact")
    shutil.rmtree(_state(deploy_vault))
    with _lock_held(deploy_vault):
        typed = run("recall", "kamal", "--scope", "agent-memory")
        by_type = run("recall", "kamal", "--type", "fact", "--scope", "full-vault")
    assert [h["title"] for h in typed["hits"]] == ["Kamal secrets"], typed["hits"]
    assert [h["title"] for h in by_type["hits"]] == ["Kamal secrets"], by_type["hits"]


def test_a_state_dir_without_write_permission_is_named(tmp_path, monkeypatch):
    """(Tests run as root, for whom no folder is read-only: the permission answer is stood in for.)"""
    from hive_brain.store import vault

    state = tmp_path / "state" / "vid"
    state.mkdir(parents=True)
    assert vault.unusable_state(state) is None and vault.unusable_state(tmp_path / "new" / "vid") is None
    monkeypatch.setattr(vault.os, "access", lambda p, mode: False)
    assert vault.unusable_state(state) == f"{state} is not writable"
    assert vault.unusable_state(tmp_path / "new" / "vid") == f"{tmp_path} is not writable (it should hold {tmp_path / 'new' / 'vid'})"
    err = vault.state_unusable_error(state, PermissionError(13, "Permission denied"))
    assert err is not None and err.kind == "StateUnusable" and "HIVE_BRAIN_STATE_DIR" in str(err)
