"""Agent hooks end to end: real hook JSON on stdin of the real hook process, a real vault and index."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from tests.helpers import remember, run

DO_ALL_3_REPLY = (
    "Three things are left before the release:\n"
    "1. migrate the database\n2. rotate the keys\n3. update the docs"
)


def hook(
    event: str,
    payload: dict | str,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 30,
) -> tuple[int, dict | None, str, float]:
    """Run `python -m hive_brain hook <event>` like the agent; (exit code, stdout JSON, stderr, seconds)."""
    e = dict(os.environ)
    e.update(env or {})
    data = payload if isinstance(payload, str) else json.dumps(payload)
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "hive_brain", "hook", event],
        input=data,
        capture_output=True,
        text=True,
        env=e,
        cwd=cwd,
        timeout=timeout,
    )
    took = time.monotonic() - t0
    out = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, out, p.stderr, took


def context_of(out: dict | None) -> str:
    return ((out or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""


def write_transcript(path: Path, entries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


def user(text: str, **kw) -> dict:
    return {
        "type": "user",
        "isSidechain": False,
        "sessionId": kw.pop("sid", "sess-1234abcd"),
        "cwd": "/home/u/webapp",
        "timestamp": kw.pop("ts", "2026-03-01T10:00:00Z"),
        "message": {"role": "user", "content": text},
        **kw,
    }


def assistant(text: str, **kw) -> dict:
    return {
        "type": "assistant",
        "isSidechain": False,
        "sessionId": kw.pop("sid", "sess-1234abcd"),
        "timestamp": kw.pop("ts", "2026-03-01T10:00:05Z"),
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        **kw,
    }


def tool_round() -> list[dict]:
    return [
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat .env"}}
                ],
            },
        },
        {
            "type": "user",
            "toolUseResult": {"stdout": "TOKEN=abc"},
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "TOKEN=toolresultvalue"}],
            },
        },
    ]


@pytest.fixture
def indexed(vault_path):
    from hive_brain.engine import Engine

    remember("Package manager", "Always use pnpm for JavaScript projects, never npm.", "instruction")
    remember(
        "Key rotation procedure",
        "Rotate the API keys with vault-cli rotate --all, then restart the workers.",
        "procedure",
    )
    remember(
        "Staging deploys", "Deploys to staging go through the GitHub Actions workflow deploy-staging.", "fact"
    )
    Engine.open().rebuild(embed=False)
    return vault_path


def status(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "state" / "hooks" / "status.json").read_text())


# ---------------------------------------------------------------------------------------------- prompt
def test_prompt_hook_injects_relevant_memory_lexically(indexed, tmp_path):
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "missing.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "which package manager should I use here?",
    }
    code, out, err, took = hook("prompt", payload, cwd=tmp_path)
    assert code == 0, err
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    ctx = context_of(out)
    assert "pnpm" in ctx and "Package manager" in ctx
    assert "lexical" in ctx.splitlines()[0]  # says how it was answered
    assert "Key rotation" not in ctx
    last = status(tmp_path)["last"]["prompt"]
    assert last["ok"] and last["mode"] == "lexical" and last["agent"] == "claude-code"


def test_prompt_hook_answers_the_demo_vault_lexically(tmp_path, monkeypatch):
    """What a new user meets first (scripts/wheel-check): the demo vault, no server yet. "ship" is in no
    note and the vault is eight notes, so the release note's coverage x specificity is 0.29; the lexical
    bar of 0.5 kept the hook silent on the question the demo tells the user to ask."""
    from hive_brain.cli.demo import run_demo
    from hive_brain.config import resolve

    monkeypatch.setenv("HIVE_BRAIN_AUTOSTART", "0")
    run_demo(tmp_path / "demo", resolve(), semantic=False)
    env = {"HIVE_BRAIN_VAULT": str(tmp_path / "demo")}
    code, out, err, _ = hook("prompt", {"prompt": "how do we ship a release?"}, env=env)
    assert code == 0, err
    assert "Release steps" in context_of(out), (out, err)
    code, out, err, _ = hook("prompt", {"prompt": "what is the capital of Peru?"}, env=env)
    assert code == 0 and out is None, (out, err)


@pytest.mark.parametrize("prompt", ["ok", "go on", "try again", "thanks!", "wait, stop", "keep going", "好的，继续"])
def test_prompt_hook_keeps_quiet_when_the_prompt_only_talks_to_the_agent(tmp_path, vault_path, prompt):
    """Each of these words is in one note here, as the title of the Go notes or in a note's text; searched,
    "ok" brought the hotfix note (evidence 1.0) and "go on" the Go notes."""
    from hive_brain.engine import Engine

    remember("Go errors", "Wrap errors with %w and keep going only after logging them.", "instruction")
    remember("Hotfix branch", "Hotfix branches start from the release tag; ok to skip review for one-liners.", "procedure")
    remember("Stop the line", "Wait for the on-call to say stop before you try again after a failed deploy; thanks.", "procedure")
    Engine.open().rebuild(embed=False)
    code, out, err, _ = hook("prompt", {"prompt": prompt})
    assert code == 0 and out is None, (out, err)
    code, out, err, _ = hook("prompt", {"prompt": "how do I wrap go errors?"})
    assert "Go errors" in context_of(out), (out, err)  # the same words, about the work, still answer


def _usage_records() -> list[dict]:
    from hive_brain.config import resolve
    from hive_brain.memory.operations import usage_log
    from hive_brain.store.vault import open_vault

    return list(usage_log(open_vault(resolve()).state).read())


def test_prompt_hook_logs_what_it_injected_as_retrieved_usage(indexed, tmp_path):
    from hive_brain.engine import Engine

    pkg = next(e.id for e in Engine.open().catalog.all() if e.title == "Package manager")
    code, out, err, _ = hook("prompt", {"prompt": "which package manager should I use here?"})
    assert code == 0 and "pnpm" in context_of(out), err
    recs = _usage_records()
    assert len(recs) == 1 and recs[0]["kind"] == "retrieved" and recs[0]["agent"] == "claude-code"
    assert pkg in recs[0]["memory_ids"] and recs[0]["query"] is None  # the prompt is not kept
    hook("prompt", {"prompt": "explain gluon confinement in quantum chromodynamics"})  # abstains
    assert len(_usage_records()) == 1


def test_prompt_hook_never_waits_on_a_busy_usage_log(indexed, tmp_path):
    from hive_brain.config import resolve
    from hive_brain.memory.operations import usage_log
    from hive_brain.store.lock import FileLock
    from hive_brain.store.vault import open_vault

    lock = FileLock(usage_log(open_vault(resolve()).state).lock_path)
    assert lock.acquire(0)
    try:
        code, out, err, took = hook("prompt", {"prompt": "which package manager should I use here?"})
    finally:
        lock.release()
    assert code == 0 and "pnpm" in context_of(out), err  # the answer is whole; only the signal is lost
    assert _usage_records() == []
    assert status(tmp_path)["last"]["prompt"]["durationMs"] < 5000


def test_prompt_hook_abstains_on_an_absent_topic(indexed, tmp_path):
    code, out, err, _ = hook("prompt", {"prompt": "explain gluon confinement in quantum chromodynamics"})
    assert code == 0, err
    assert context_of(out) == ""


def test_prompt_hook_resolves_do_all_3_from_the_last_assistant_reply(indexed, tmp_path):
    t = write_transcript(
        tmp_path / "t.jsonl",
        [
            user("what is left before the release?"),
            *tool_round(),
            assistant(DO_ALL_3_REPLY),
            user("do all 3", ts="2026-03-01T10:01:00Z"),  # the prompt may already be in the transcript
        ],
    )
    payload = {"session_id": "sess-1234abcd", "transcript_path": str(t), "prompt": "do all 3"}
    code, out, err, _ = hook("prompt", payload)
    assert code == 0, err
    assert "Key rotation procedure" in context_of(out)
    # Without the transcript "do all 3" means nothing.
    code, out, _, _ = hook("prompt", {"prompt": "do all 3"})
    assert code == 0 and context_of(out) == ""


def test_prompt_hook_reads_only_the_transcript_tail(indexed, tmp_path):
    filler = [user(f"question {i} " + "lorem ipsum " * 40) for i in range(300)]
    t = write_transcript(tmp_path / "big.jsonl", [*filler, assistant(DO_ALL_3_REPLY)])
    assert t.stat().st_size > 200_000
    from hive_brain.memory.conversations import last_assistant_text

    assert last_assistant_text(t).endswith("3. update the docs")
    code, out, _, _ = hook("prompt", {"transcript_path": str(t), "prompt": "ok, do all 3"})
    assert code == 0 and "Key rotation procedure" in context_of(out)


def _wait_for_an_index(timeout: float = 60.0) -> None:
    from hive_brain.engine import Engine

    eng = Engine.open()
    deadline = time.monotonic() + timeout
    while eng.indexer.gens.current_id() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert eng.indexer.gens.current_id() is not None, "the index was not built in the background"
    time.sleep(0.5)  # let the detached rebuild release the lock and exit


@pytest.mark.parametrize("how", ["never indexed", "state dir deleted"])
def test_prompt_hook_with_no_index_answers_by_scanning_and_asks_for_a_rebuild(vault_path, tmp_path, how):
    """No index at all and no server (a fresh vault, the state dir deleted): the hook abstained with
    "building its index" and injected nothing, where a scan of the notes answers (issue 26). It still
    never indexes itself: a detached rebuild builds the index for the next prompt."""
    import shutil

    # A note written by hand (a CLI write would publish an index generation).
    (vault_path / "Projects" / "Package manager.md").write_text("Always use pnpm, never npm.\n")
    if how == "state dir deleted":
        from hive_brain.engine import Engine

        Engine.open().rebuild(embed=False)
        shutil.rmtree(tmp_path / "state")
    code, out, err, _ = hook("prompt", {"prompt": "which package manager, pnpm or npm?"})
    assert code == 0, err
    ctx = context_of(out)
    assert "pnpm" in ctx and "plain scan of the notes" in ctx, (out, err)
    assert status(tmp_path)["last"]["prompt"]["mode"] == "scan"
    _wait_for_an_index()
    code, out, err, _ = hook("prompt", {"prompt": "which package manager?"})
    assert code == 0 and "pnpm" in context_of(out) and "plain scan" not in context_of(out), (out, err)
    assert status(tmp_path)["last"]["prompt"]["mode"] == "lexical"


def test_prompt_hook_answers_by_scanning_when_the_state_dir_cannot_be_used(vault_path, tmp_path):
    """A file where the state dir should be: no index can be read or built; the notes still answer."""
    (vault_path / "Projects" / "Package manager.md").write_text("Always use pnpm, never npm.\n")
    (tmp_path / "blocker").write_text("x")
    code, out, err, _ = hook("prompt", {"prompt": "which package manager, pnpm or npm?"},
                             env={"HIVE_BRAIN_STATE_DIR": str(tmp_path / "blocker" / "state")})
    assert code == 0, err
    ctx = context_of(out)
    assert "pnpm" in ctx and "plain scan of the notes" in ctx, (out, err)


def test_prompt_hook_with_no_index_starts_the_server_to_build_it(vault_path, tmp_path):
    """Autostart on (the default): the scan answers, then the server is started after the answer, and
    it indexes on start; no detached rebuild competes with it for the same cores."""
    from hive_brain.config import resolve
    from hive_brain.daemon.server import stop_server
    from hive_brain.rpc import client
    from hive_brain.store.vault import open_vault

    (vault_path / "Projects" / "Package manager.md").write_text("Always use pnpm, never npm.\n")
    state = open_vault(resolve()).state
    try:
        code, out, err, _ = hook("prompt", {"prompt": "which package manager, pnpm or npm?"},
                                 env={"HIVE_BRAIN_AUTOSTART": "1"})
        assert code == 0 and "pnpm" in context_of(out), (out, err)
        last = status(tmp_path)["last"]["prompt"]
        assert last["mode"] == "scan" and last["serverStarted"] is True, last
        assert not (state / "hooks" / "rebuild-requested").exists()
        client.wait_ready(state, 60)
        _wait_for_an_index()
    finally:
        stop_server(state, timeout=30)


def test_prompt_hook_scans_the_notes_when_the_index_files_are_gone(vault_path, tmp_path):
    """The generation names notes but the lexical index is gone (deleted, moved aside as damaged): the
    hook's read-only view read an empty index and injected nothing (issue 28). Now the notes are
    scanned for the prompt's words, the pack says so, and a rebuild is asked for."""
    import shutil

    from hive_brain.agents.hooks import lexical_view
    from hive_brain.config import resolve
    from hive_brain.engine import Engine
    from hive_brain.store.vault import open_vault

    (vault_path / "Projects" / "Package manager.md").write_text("Always use pnpm, never npm.\n")
    eng = Engine.open()
    eng.rebuild(embed=False)
    shutil.rmtree(eng.vault.state / "index" / "lexical")
    code, out, err, _ = hook("prompt", {"prompt": "which package manager, pnpm or npm?"})
    assert code == 0, err
    ctx = context_of(out)
    assert "pnpm" in ctx and "plain scan of the notes" in ctx, out
    assert status(tmp_path)["last"]["prompt"]["mode"] == "scan"
    settings = resolve()
    deadline = time.monotonic() + 60
    while lexical_view(open_vault(settings), settings).scan is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lexical_view(open_vault(settings), settings).scan is None, "the background rebuild did not run"
    time.sleep(0.5)  # let the detached rebuild release the lock and exit


def test_a_hung_server_costs_the_prompt_its_server_answer_not_its_memory(indexed, tmp_path):
    from hive_brain.engine import Engine
    from hive_brain.rpc import client

    state = Engine.open().vault.state
    path = client.socket_path(state)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.unlink(missing_ok=True)
    (state / client.READY_NAME).touch()  # a server that hung after it was ready
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_hang() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])  # accept, read nothing, answer nothing
            except OSError:
                continue

    th = threading.Thread(target=accept_and_hang, daemon=True)
    th.start()
    try:
        # 3 s keeps a third (1 s) for the lexical answer: at 1 s (0.5 s kept) a loaded machine could not
        # fit the in-process answer in it, and this test is about the fallback, not its speed.
        deadline = 3.0
        code, out, err, took = hook(
            "prompt",
            {"prompt": "which package manager should I use?"},
            env={"HIVE_BRAIN_HOOK_DEADLINE": str(deadline)},
        )
        assert code == 0, err
        # The server got the deadline less the reserve; the lexical answer came in what was left.
        assert "pnpm" in context_of(out)
        assert took < deadline + 5.0  # bounds a hang; the mode below proves the fallback
        assert held, "the hook never reached the server"
        last = status(tmp_path)["last"]["prompt"]
        assert last["mode"] == "lexical" and "did not answer" in last["serverError"]
    finally:
        stop.set()
        th.join(2)
        for c in held:
            c.close()
        srv.close()
        path.unlink(missing_ok=True)


def test_prompt_hook_fails_closed(tmp_path):
    not_a_vault = tmp_path / "nothing"
    not_a_vault.mkdir()
    env = {"HIVE_BRAIN_VAULT": str(not_a_vault)}
    code, out, err, _ = hook("prompt", {"prompt": "which package manager?"}, env=env)
    assert code == 0
    assert "hookSpecificOutput" not in out
    assert "hive-brain hooks status" in out["systemMessage"] and "\n" not in out["systemMessage"]
    st = status(tmp_path)
    assert st["lastError"]["event"] == "prompt" and "not a hive-brain vault" in st["lastError"]["error"]
    # Opt-in blocking: exit 2 with the message on stderr.
    code, out, err, _ = hook("prompt", {"prompt": "x y"}, env={**env, "HIVE_BRAIN_HOOK_BLOCK_ON_ERROR": "1"})
    assert code == 2 and out is None and "hooks status" in err
    # Malformed input and a malformed agent id fail closed too.
    code, out, _, _ = hook("prompt", "{not json", env=env)
    assert code == 0 and "systemMessage" in out
    code, out, _, _ = hook("prompt", {"prompt": "x"}, env={"HIVE_AGENT_ID": "../evil"})
    assert code == 0 and "systemMessage" in out and "hookSpecificOutput" not in out


def test_answer_hook_mode_through_the_cli(indexed):
    res = run("answer", "--hook", "which package manager should I use?")
    assert not res["abstained"] and res["mode"] == "lexical" and "pnpm" in res["context"]


# ---------------------------------------------------------------------------------------------- session start
def test_session_start_prints_core_memory(vault_path, tmp_path):
    core = vault_path / "Memory" / "Core Memory.md"
    core.write_text(
        "---\ntitle: Core Memory\ntype: core\n---\n\n# Core Memory\n\n## About me\n"
        "- I am Ana, a backend developer who works in Go.\n- \n\n## How I work\n- \n",
        encoding="utf-8",
    )
    remember("Commit style", "Write commit messages in the imperative mood.", "instruction")
    remember("Flaky integration tests", "Run the integration tests twice before blaming the code.", "lesson", agent="claude-code")
    remember("Other lesson", "Something only the other agent learned.", "lesson", agent="other-agent")
    code, out, err, _ = hook(
        "session-start",
        {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"},
        env={"HIVE_AGENT_ID": "claude-code"},
    )
    assert code == 0, err
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    ctx = context_of(out)
    assert "I am Ana, a backend developer" in ctx
    assert "## How I work" not in ctx  # empty template sections are dropped
    assert "imperative mood" in ctx
    assert "Run the integration tests twice" in ctx
    assert "other agent learned" not in ctx


def test_session_start_with_an_empty_vault_prints_nothing(vault_path):
    code, out, err, _ = hook("session-start", {"session_id": "s1"})
    assert code == 0, err
    assert out is None


# ---------------------------------------------------------------------------------------------- stop
SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"


def test_stop_captures_a_redacted_conversation_once_per_session(vault_path, tmp_path):
    t = write_transcript(
        tmp_path / "sess.jsonl",
        [
            user(f"Deploy the app. My key is {SECRET} and <private>my home address is 12 Elm St</private>."),
            *tool_round(),
            assistant(f"Done. I will not store {SECRET}."),
        ],
    )
    payload = {
        "session_id": "sess-1234abcd",
        "transcript_path": str(t),
        "cwd": "/home/u/webapp",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    code, out, err, _ = hook("stop", payload)
    assert code == 0, err
    assert out is None  # a Stop hook that prints nothing never blocks the agent
    folder = vault_path / "Memory" / "Conversations" / "claude-code"
    notes = list(folder.glob("*.md"))
    assert len(notes) == 1
    text = notes[0].read_text()
    assert "session_id: sess-1234abcd" in text and "project: webapp" in text and "type: conversation" in text
    assert "**User:** Deploy the app." in text and "**Assistant:** Done." in text
    assert "toolresultvalue" not in text and "cat .env" not in text
    for f in vault_path.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert SECRET.encode() not in data and b"12 Elm St" not in data, f
    # The same session again: same note, unchanged.
    code, _, err, _ = hook("stop", payload)
    assert code == 0, err
    assert list(folder.glob("*.md")) == notes and notes[0].read_text() == text
    assert status(tmp_path)["last"]["stop"]["mode"] == "already"
    # One more turn: the same note is rewritten.
    with t.open("a") as f:
        f.write(json.dumps(user("Now update the docs", ts="2026-03-01T10:05:00Z")) + "\n")
        f.write(json.dumps(assistant("Docs updated.", ts="2026-03-01T10:05:30Z")) + "\n")
    code, _, err, _ = hook("stop", payload)
    assert code == 0, err
    assert list(folder.glob("*.md")) == notes
    assert "turns: 2" in notes[0].read_text() and "Docs updated." in notes[0].read_text()


def test_stop_waits_a_moment_for_the_reply_the_agent_has_not_written_yet(vault_path, tmp_path):
    """Claude Code under load ran a turn's Stop hook before its transcript held the reply: the hook found
    "no assistant reply yet" and skipped the turn (the interactive e2e run, 2 of ~20 under load)."""
    import threading

    t = write_transcript(tmp_path / "sess.jsonl", [user("Deploy the app to staging.")])

    def reply_late() -> None:
        time.sleep(0.5)
        with t.open("a") as f:
            f.write(json.dumps(assistant("Deployed to staging.")) + "\n")

    writer = threading.Thread(target=reply_late)
    writer.start()
    code, _, err, _ = hook("stop", {"session_id": "sess-late", "transcript_path": str(t), "hook_event_name": "Stop"})
    writer.join()
    assert code == 0, err
    last = status(tmp_path)["last"]["stop"]
    assert last["mode"] == "captured", last
    # A turn that never gets its reply is still given up on, within the wait.
    t2 = write_transcript(tmp_path / "sess2.jsonl", [user("Only a question.")])
    code, _, err, _ = hook("stop", {"session_id": "sess-none", "transcript_path": str(t2), "hook_event_name": "Stop"})
    assert code == 0, err
    last = status(tmp_path)["last"]["stop"]
    assert last["mode"] == "skipped" and last["reason"] == "no assistant reply yet", last


def test_stop_queues_when_the_vault_is_locked_and_consolidate_catches_up(vault_path, tmp_path):
    from hive_brain.engine import Engine
    from hive_brain.store.lock import vault_lock

    t = write_transcript(
        tmp_path / "s.jsonl", [user("How do we deploy?"), assistant("With the deploy workflow.")]
    )
    state = Engine.open().vault.state
    with vault_lock(state, timeout=5, command="test holds the lock"):
        code, out, err, took = hook(
            "stop",
            {"session_id": "sess-1234abcd", "transcript_path": str(t)},
            env={"HIVE_BRAIN_LOCK_TIMEOUT": "0.3"},
        )
    assert code == 0, err
    assert out is None
    assert status(tmp_path)["last"]["stop"]["mode"] == "queued"
    pending = (state / "hooks" / "pending-conversations.jsonl").read_text()
    assert str(t) in pending and "deploy" not in pending.lower().replace(str(t).lower(), "")
    assert not (vault_path / "Memory" / "Conversations" / "claude-code").exists()
    assert run("hooks", "status")["pendingConversations"] == 1
    res = run("consolidate")
    assert res["captured"] == 1 and res["pendingProcessed"] == 1 and res["pendingLeft"] == 0
    assert not (state / "hooks" / "pending-conversations.jsonl").exists()
    hits = run("recall", "how do we deploy", "--scope", "full-vault")
    assert any(h["kind"] == "conversation" for h in hits["hits"])


def test_stop_for_codex_goes_to_the_codex_folder(vault_path, tmp_path):
    codex_dir = Path.home() / ".codex" / "sessions"
    codex_dir.mkdir(parents=True)
    t = write_transcript(
        codex_dir / "rollout-1.jsonl",
        [
            {
                "type": "session_meta",
                "payload": {"id": "0199-codex-sess", "cwd": "/w/api", "originator": "codex_cli_rs"},
            },
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}
                    ],
                },
            },
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Add a health endpoint"}],
                },
            },
            {
                "type": "response_item",
                "payload": {"type": "function_call", "name": "shell", "arguments": "{}"},
            },
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Added GET /health."}],
                },
            },
        ],
    )
    code, _, err, _ = hook("stop", {"session_id": "0199-codex-sess", "transcript_path": str(t)})
    assert code == 0, err
    notes = list((vault_path / "Memory" / "Conversations" / "codex").glob("*.md"))
    assert len(notes) == 1
    text = notes[0].read_text()
    assert "Add a health endpoint" in text and "environment_context" not in text and "project: api" in text


# ---------------------------------------------------------------------------------------------- click side
def test_hook_help_goes_through_click():
    p = subprocess.run(
        [sys.executable, "-m", "hive_brain", "hook", "prompt", "--help"], capture_output=True, text=True
    )
    assert p.returncode == 0 and "Example" in p.stdout
    res = CliRunner().invoke(main, ["hook", "session-end", "--help"])
    assert res.exit_code == 0 and "Example" in res.output


# ---------------------------------------------------------------------------------------------- install
def claude_settings() -> Path:
    return Path.home() / ".claude" / "settings.json"


OTHER = {
    "model": "opus",
    "hooks": {
        "UserPromptSubmit": [
            {"matcher": "", "hooks": [{"type": "command", "command": "~/bin/other-hook.sh"}]}
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}],
    },
}


def test_install_claude_merges_idempotently_with_backup(vault_path):
    path = claude_settings()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(OTHER, indent=2))
    res = run("hooks", "install")
    assert res["changed"] and res["backup"] and Path(res["backup"]).read_text() == json.dumps(OTHER, indent=2)
    data = json.loads(path.read_text())
    assert data["model"] == "opus" and data["hooks"]["PreToolUse"] == OTHER["hooks"]["PreToolUse"]
    ups = data["hooks"]["UserPromptSubmit"]
    assert ups[0] == OTHER["hooks"]["UserPromptSubmit"][0]  # the other hook is untouched
    ours = ups[1]["hooks"][0]
    assert ours["type"] == "command" and ours["command"].startswith("HIVE_AGENT_ID=claude-code ")
    assert ours["command"].endswith(" hook prompt") and str(vault_path) in ours["command"]
    assert "hook session-start" in data["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert "hook stop" in data["hooks"]["Stop"][0]["hooks"][0]["command"]
    # On exit Claude Code kills a Stop hook still running: SessionEnd captures the last turn then.
    assert "hook session-end" in data["hooks"]["SessionEnd"][0]["hooks"][0]["command"]
    before = path.read_text()
    baks = sorted(path.parent.glob("settings.json.bak-*"))
    res = run("hooks", "install")
    assert not res["changed"] and path.read_text() == before
    assert sorted(path.parent.glob("settings.json.bak-*")) == baks  # no write, no new backup
    st = run("hooks", "status")
    assert set(st["claudeCode"]["user"]["events"]) == {"UserPromptSubmit", "SessionStart", "Stop", "SessionEnd"}
    res = run("hooks", "uninstall")
    assert res["removed"] == 4
    assert json.loads(path.read_text()) == OTHER


def test_install_dry_run_writes_nothing_and_invalid_json_is_refused(vault_path, tmp_path, monkeypatch):
    path = claude_settings()
    res = run("hooks", "install", "--dry-run")
    assert res["changed"] and "+++" in res["diff"] and "hook prompt" in res["diff"]
    assert not path.exists()
    path.parent.mkdir(parents=True)
    path.write_text('{"hooks": {oops')
    res = run("hooks", "install", ok=False)
    assert res["_exit"] != 0 and "not valid JSON" in res["message"]
    assert path.read_text() == '{"hooks": {oops'
    assert not list(path.parent.glob("settings.json.bak-*"))
    # --project writes under the current folder, not home.
    monkeypatch.chdir(tmp_path)
    run("hooks", "install", "--project")
    assert (tmp_path / ".claude" / "settings.json").is_file()


def test_install_codex_mcp_entry(vault_path):
    import tomllib

    cfg = Path.home() / ".codex" / "config.toml"
    cfg.parent.mkdir(parents=True)
    original = 'model = "gpt-5"\n\n[mcp_servers.other]\ncommand = "other"\n'
    cfg.write_text(original)
    dry = run("hooks", "install", "--agent", "codex", "--dry-run")
    assert dry["changed"] and cfg.read_text() == original
    run("hooks", "install", "--agent", "codex")
    data = tomllib.loads(cfg.read_text())
    srv = data["mcp_servers"]["hive-brain"]
    assert srv["args"][-1] == "mcp" and srv["env"]["HIVE_AGENT_ID"] == "codex"
    assert data["model"] == "gpt-5" and data["mcp_servers"]["other"]["command"] == "other"
    text = cfg.read_text()
    assert not run("hooks", "install", "--agent", "codex")["changed"] and cfg.read_text() == text
    assert run("hooks", "status")["codex"]["mcpServer"]
    run("hooks", "uninstall", "--agent", "codex")
    assert cfg.read_text() == original
    cfg.write_text("this is = = not toml")
    res = run("hooks", "install", "--agent", "codex", ok=False)
    assert res["_exit"] != 0 and "not valid TOML" in res["message"]


def test_installed_command_really_runs_the_hook(indexed, tmp_path):
    run("hooks", "install")
    cmd = json.loads(claude_settings().read_text())["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    env = {k: v for k, v in os.environ.items() if k != "HIVE_BRAIN_VAULT"}  # the command pins the vault
    p = subprocess.run(
        ["/bin/sh", "-c", cmd],
        input=json.dumps({"prompt": "which package manager should I use?"}),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert p.returncode == 0, p.stderr
    assert "pnpm" in context_of(json.loads(p.stdout))


def test_prompt_hook_gives_up_at_its_deadline(indexed, tmp_path):
    """Whatever is slow (here: everything, against a 1 ms deadline), the prompt goes through on time."""
    code, out, err, took = hook("prompt", {"prompt": "which package manager should I use?"},
                                env={"HIVE_BRAIN_HOOK_DEADLINE": "0.001"})
    assert code == 0, err
    assert context_of(out) == ""
    assert status(tmp_path)["last"]["prompt"]["mode"] == "timeout"
